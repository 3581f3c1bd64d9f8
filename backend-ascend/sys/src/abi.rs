//! A machine-readable description of every C declaration this crate makes.
//!
//! The declarations in [`types`](crate::types), [`consts`](crate::consts),
//! [`codes`](crate::codes) and the [`for_each_acl_fn!`](crate::for_each_acl_fn) list are
//! recorded here as data, by the same macros that define them, so nothing can be declared
//! without also being described. The header check (`cargo xtask acl-headers check`, run by
//! the test `tests/ascend_sys/abi_headers.rs`) turns these tables into a C++ translation unit that includes the vendor's ACL headers and asserts every
//! function signature, type, struct layout and constant value; the emulator may use them
//! too. Nothing here is needed at run time by the backend.

use std::fmt;

/// One parameter of an ACL function, as declared in the Rust list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamDecl {
    /// Parameter name, as in the vendor header (e.g. `configPath`).
    pub name: &'static str,
    /// The Rust type as written in the list (`stringify!` output, e.g. `*const c_char`).
    pub rust_type: &'static str,
}

/// One ACL function of the [`AclApi`](crate::AclApi) table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FnDecl {
    /// The exported C symbol, e.g. `aclrtMallocPhysical`.
    pub name: &'static str,
    /// Whether [`AclApi::load`](crate::AclApi::load) fails without it.
    pub required: bool,
    /// The parameters, in order.
    pub params: &'static [ParamDecl],
    /// The Rust return type as written in the list.
    pub ret: &'static str,
}

impl FnDecl {
    /// The C type-id of a pointer to this function, e.g.
    /// `aclError (*)(const char *)`, derived from the Rust declaration with
    /// [`c_type_name`]. Fails on a Rust type the mapping does not know.
    pub fn c_fn_ptr_type(&self) -> Result<String, UnmappedType> {
        let ret = c_type_name(self.ret)?;
        let params = self.c_params(false)?;
        Ok(format!("{ret} (*)({params})"))
    }

    /// The C prototype the Rust declaration stands for, e.g.
    /// `aclError aclInit(const char *configPath)`. Used in messages.
    pub fn c_prototype(&self) -> Result<String, UnmappedType> {
        let ret = c_type_name(self.ret)?;
        let params = self.c_params(true)?;
        Ok(format!("{ret} {}({params})", self.name))
    }

    fn c_params(&self, with_names: bool) -> Result<String, UnmappedType> {
        if self.params.is_empty() {
            return Ok("void".to_owned());
        }
        let mut out = Vec::with_capacity(self.params.len());
        for p in self.params {
            let ty = c_type_name(p.rust_type)?;
            out.push(if !with_names {
                ty
            } else if ty.ends_with('*') {
                format!("{ty}{}", p.name)
            } else {
                format!("{ty} {}", p.name)
            });
        }
        Ok(out.join(", "))
    }
}

/// How the vendor headers declare a constant, which decides what the ABI test checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstKind {
    /// `#define NAME literal`: value, C type size and signedness are checked.
    Macro,
    /// `static const int NAME = v;` (the ACL-layer error codes): value, size, signedness.
    StaticConst,
    /// An enumerator of the named enum type: value checked; the enum's size is checked
    /// with the type (the signedness of a C enum is the compiler's choice).
    Enumerator {
        /// The enum typedef the constant belongs to.
        enum_type: &'static str,
    },
    /// A `#define` that is a length (a C `int`), which this crate types as `usize` for
    /// use as a buffer size: only the value is checked.
    LengthMacro,
    /// Not in the vendor headers: devipc's own name for a documented value (for example
    /// the IPC key length "fixed at 65" that the headers leave unnamed). Not checked.
    Devipc,
}

/// One constant this crate defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstDecl {
    /// The vendor's name (or devipc's, for [`ConstKind::Devipc`]).
    pub name: &'static str,
    /// The value, widened losslessly.
    pub value: i128,
    /// The Rust type of the constant (`stringify!` output).
    pub rust_type: &'static str,
    /// `size_of` the Rust type.
    pub size: usize,
    /// Whether the Rust type is signed.
    pub signed: bool,
    /// How the header declares it.
    pub kind: ConstKind,
}

/// What kind of C type a [`TypeDecl`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    /// A typedef of a plain C type: the Rust alias must be the same type
    /// (e.g. `aclError` = `int`, `aclrtStream` = `void *`).
    Alias,
    /// A C enum typedef, carried in Rust as its C integer type: size and alignment are
    /// checked (the enumerators are [`ConstDecl`]s).
    Enum,
    /// A `#[repr(C)]` struct: see [`StructDecl`] for its fields.
    Struct,
}

/// One named C type this crate mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeDecl {
    /// The vendor's typedef name.
    pub name: &'static str,
    /// The Rust type the name stands for (`stringify!` output of the alias target, or the
    /// struct's own name).
    pub rust_type: &'static str,
    /// `size_of` the Rust type.
    pub size: usize,
    /// `align_of` the Rust type.
    pub align: usize,
    /// What kind of C type it is.
    pub kind: TypeKind,
}

/// One field of a [`StructDecl`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDecl {
    /// The field name (a raw identifier such as `r#type` keeps its `r#` prefix here).
    pub name: &'static str,
    /// The Rust type as written (`stringify!` output).
    pub rust_type: &'static str,
    /// `offset_of!` the field.
    pub offset: usize,
    /// `size_of` the field's type.
    pub size: usize,
}

impl FieldDecl {
    /// The field's C name: [`FieldDecl::name`] without a raw-identifier prefix.
    pub fn c_name(&self) -> &'static str {
        self.name.strip_prefix("r#").unwrap_or(self.name)
    }
}

/// The layout of one `#[repr(C)]` struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructDecl {
    /// The vendor's typedef name.
    pub name: &'static str,
    /// `size_of` the struct.
    pub size: usize,
    /// `align_of` the struct.
    pub align: usize,
    /// Every field, in declaration order.
    pub fields: &'static [FieldDecl],
}

/// Every function of the [`for_each_acl_fn!`](crate::for_each_acl_fn) list, in list
/// order: required ones first.
pub const FUNCTIONS: &[FnDecl] = FUNCTION_DECLS;

/// Generates [`FUNCTION_DECLS`] from the list.
macro_rules! function_decls {
    (
        []
        required { $( $(#[$rdoc:meta])* fn $rname:ident ( $($rp:ident : $rt:ty),* $(,)? ) -> $rret:ty ; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident ( $($op:ident : $ot:ty),* $(,)? ) -> $oret:ty ; )* }
    ) => {
        /// Records of every function of the list, for [`FUNCTIONS`].
        pub(crate) const FUNCTION_DECLS: &[FnDecl] = &[
            $(
                FnDecl {
                    name: stringify!($rname),
                    required: true,
                    params: &[$(ParamDecl { name: stringify!($rp), rust_type: stringify!($rt) }),*],
                    ret: stringify!($rret),
                },
            )*
            $(
                FnDecl {
                    name: stringify!($oname),
                    required: false,
                    params: &[$(ParamDecl { name: stringify!($op), rust_type: stringify!($ot) }),*],
                    ret: stringify!($oret),
                },
            )*
        ];
    };
}

crate::for_each_acl_fn!(function_decls);

/// Every named C type of [`types`](crate::types): plain typedefs, enums, then structs.
pub fn types() -> impl Iterator<Item = &'static TypeDecl> {
    crate::types::type_decls()
}

/// Every struct of [`types`](crate::types) with its field layout.
pub const STRUCTS: &[StructDecl] = crate::types::STRUCT_DECLS;

/// Every constant this crate defines: enumerators of [`types`](crate::types), flags of
/// [`consts`](crate::consts) and error codes of [`codes`](crate::codes), in that order.
pub fn constants() -> impl Iterator<Item = &'static ConstDecl> {
    crate::types::ENUM_CONST_DECLS
        .iter()
        .chain(crate::consts::CONST_DECLS)
        .chain(crate::codes::CODE_DECLS)
}

/// A Rust type that [`c_type_name`] cannot express in C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmappedType(pub String);

impl fmt::Display for UnmappedType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no C spelling for Rust type `{}`", self.0)
    }
}

impl std::error::Error for UnmappedType {}

/// Spells a Rust FFI type of this crate as a C type-id.
///
/// Handles `*mut T` / `*const T` (any depth, `const` applied to the pointee), arrays
/// `[T; N]`, the fixed-width integers (`i32` -> `int32_t`, `usize` -> `size_t`, ...),
/// `c_char`, `c_int`, `c_void`, and every vendor name starting with `acl`, which is kept
/// as is. Paths keep their last segment (`core::ffi::c_char` -> `char`). Input is the
/// `stringify!` form of a type, whose spacing varies (`* const c_char`, `*const c_char`).
///
/// ```
/// use devipc_ascend_sys::abi::c_type_name;
/// assert_eq!(c_type_name("*mut *mut c_void").unwrap(), "void **");
/// assert_eq!(c_type_name("* const aclrtPhysicalMemProp").unwrap(), "const aclrtPhysicalMemProp *");
/// assert_eq!(c_type_name("*const *mut c_void").unwrap(), "void *const *");
/// assert_eq!(c_type_name("[u8; 12]").unwrap(), "uint8_t[12]");
/// assert!(c_type_name("String").is_err());
/// ```
pub fn c_type_name(rust: &str) -> Result<String, UnmappedType> {
    let unmapped = || UnmappedType(rust.to_owned());
    let t = rust.trim();
    if let Some(rest) = t.strip_prefix('*') {
        let rest = rest.trim_start();
        let (is_const, pointee) = if let Some(p) = rest.strip_prefix("const") {
            (true, p)
        } else if let Some(p) = rest.strip_prefix("mut") {
            (false, p)
        } else {
            return Err(unmapped());
        };
        if !pointee.starts_with(char::is_whitespace) && !pointee.starts_with(['*', '[', ':']) {
            return Err(unmapped());
        }
        let mut inner = c_type_name(pointee).map_err(|_| unmapped())?;
        if inner.contains('[') {
            // Pointers to arrays never occur in the ACL API; refuse rather than misspell.
            return Err(unmapped());
        }
        if is_const {
            inner = if inner.ends_with('*') {
                format!("{inner}const")
            } else {
                format!("const {inner}")
            };
        }
        return Ok(if inner.ends_with('*') {
            format!("{inner}*")
        } else {
            format!("{inner} *")
        });
    }
    if let Some(body) = t.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
        let (elem, len) = body.rsplit_once(';').ok_or_else(unmapped)?;
        let len: usize = len.trim().parse().map_err(|_| unmapped())?;
        let elem = c_type_name(elem).map_err(|_| unmapped())?;
        if elem.contains(['*', '[']) {
            return Err(unmapped());
        }
        return Ok(format!("{elem}[{len}]"));
    }
    let base = t.rsplit("::").next().unwrap_or(t).trim();
    let c = match base {
        "c_void" => "void",
        "c_char" => "char",
        "c_int" => "int",
        "c_uint" => "unsigned int",
        "i8" => "int8_t",
        "i16" => "int16_t",
        "i32" => "int32_t",
        "i64" => "int64_t",
        "u8" => "uint8_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "usize" => "size_t",
        "bool" => "bool",
        name if name.starts_with("acl")
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            name
        }
        _ => return Err(unmapped()),
    };
    Ok(c.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_rust_types_to_c() {
        let cases = [
            ("aclError", "aclError"),
            ("c_int", "int"),
            ("* const c_char", "const char *"),
            ("*const c_char", "const char *"),
            ("*mut c_char", "char *"),
            ("*mut *mut c_void", "void **"),
            ("* mut * mut c_void", "void **"),
            ("*const c_void", "const void *"),
            ("*const *const c_void", "const void *const *"),
            ("*mut aclrtDrvMemHandle", "aclrtDrvMemHandle *"),
            ("*mut aclrtMemAccessDesc", "aclrtMemAccessDesc *"),
            ("usize", "size_t"),
            ("u64", "uint64_t"),
            ("i32", "int32_t"),
            ("*mut i32", "int32_t *"),
            ("::core::ffi::c_char", "char"),
            ("[u8; 12]", "uint8_t[12]"),
            ("[u8 ; 128]", "uint8_t[128]"),
        ];
        for (rust, c) in cases {
            assert_eq!(c_type_name(rust).as_deref(), Ok(c), "{rust}");
        }
        for bad in [
            "String",
            "*c_void",
            "*mutc_void",
            "[u8; n]",
            "*mut [u8; 4]",
            "Vec<u8>",
        ] {
            assert!(c_type_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_declared_type_has_a_c_spelling() {
        for f in FUNCTIONS {
            f.c_fn_ptr_type()
                .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        }
        for s in STRUCTS {
            for field in s.fields {
                c_type_name(field.rust_type).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            }
        }
        for t in types().filter(|t| t.kind == TypeKind::Alias) {
            c_type_name(t.rust_type).unwrap_or_else(|e| panic!("{}: {e}", t.name));
        }
    }

    #[test]
    fn prototypes_read_like_the_header() {
        let init = FUNCTIONS.iter().find(|f| f.name == "aclInit").unwrap();
        assert_eq!(
            init.c_prototype().unwrap(),
            "aclError aclInit(const char *configPath)"
        );
        assert_eq!(init.c_fn_ptr_type().unwrap(), "aclError (*)(const char *)");
        let fin = FUNCTIONS.iter().find(|f| f.name == "aclFinalize").unwrap();
        assert_eq!(fin.c_fn_ptr_type().unwrap(), "aclError (*)(void)");
        let phys = FUNCTIONS
            .iter()
            .find(|f| f.name == "aclrtMallocPhysical")
            .unwrap();
        assert_eq!(
            phys.c_fn_ptr_type().unwrap(),
            "aclError (*)(aclrtDrvMemHandle *, size_t, const aclrtPhysicalMemProp *, uint64_t)"
        );
    }

    #[test]
    fn constant_names_are_unique() {
        let mut names: Vec<_> = constants().map(|c| c.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a constant is defined twice");
    }
}
