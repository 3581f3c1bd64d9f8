//! The generator: the checking C++ translation unit, one `static_assert` per fact that
//! Rust declares and the header can confirm.

use std::fmt::Write as _;

use devipc_ascend_sys::abi::{
    self, ConstDecl, ConstKind, FieldDecl, FnDecl, StructDecl, TypeDecl, TypeKind,
};

use super::preprocess::Preprocessed;
use super::{Error, Headers, Report};

/// What to check: a copy of the crate's records (or a deliberately altered one).
#[derive(Debug, Clone)]
pub struct Decls {
    /// The functions of `for_each_acl_fn!` ([`abi::FUNCTIONS`]).
    pub functions: Vec<FnDecl>,
    /// The named C types ([`abi::types`]).
    pub types: Vec<TypeDecl>,
    /// The structs with their field layout ([`abi::STRUCTS`]).
    pub structs: Vec<StructDecl>,
    /// The constants ([`abi::constants`]).
    pub constants: Vec<ConstDecl>,
}

impl Decls {
    /// Every declaration of `devipc-ascend-sys`.
    pub fn of_crate() -> Self {
        Decls {
            functions: abi::FUNCTIONS.to_vec(),
            types: abi::types().copied().collect(),
            structs: abi::STRUCTS.to_vec(),
            constants: abi::constants().copied().collect(),
        }
    }
}

/// The C spelling of a Rust type of the records.
fn c_type(rust: &str) -> Result<String, Error> {
    abi::c_type_name(rust).map_err(|e| Error::Failed(e.to_string()))
}

/// A C integer literal of `value` that keeps its signedness.
fn c_literal(value: i128, signed: bool) -> String {
    if signed {
        format!("{value}LL")
    } else {
        format!("{value}ULL")
    }
}

/// Builds the checking translation unit; counts its assertions and lists the absent
/// declarations (and the other notes) in `report`.
pub(super) fn generate(
    decls: &Decls,
    headers: &Headers,
    pre: &Preprocessed,
    report: &mut Report,
) -> Result<String, Error> {
    let mut tu = String::new();
    for h in &headers.includes {
        writeln!(tu, "#include \"{h}\"").unwrap();
    }
    tu += "#include <stddef.h>\n#include <stdint.h>\n";
    tu += "template <class A, class B> struct devipc_same { enum { value = 0 }; };\n";
    tu += "template <class A> struct devipc_same<A, A> { enum { value = 1 }; };\n";
    tu += "#define DEVIPC_SIGNED(x) (((x) * 0 - 1) < 0)\n";
    let mut assertions = 0;
    let mut assert = |tu: &mut String, cond: String, msg: String| {
        assertions += 1;
        let msg = msg.replace('\\', "\\\\").replace('"', "\\\"");
        writeln!(tu, "static_assert({cond}, \"DEVIPC-MISMATCH {msg}\");").unwrap();
    };
    let mut absent = Vec::new();

    for f in &decls.functions {
        if !pre.has_function(f.name) {
            absent.push(format!(
                "function {} ({})",
                f.name,
                if f.required { "required" } else { "optional" }
            ));
            continue;
        }
        report.present_functions.insert(f.name.to_owned());
        let ours: Vec<&str> = f.params.iter().map(|p| p.name).collect();
        match pre.param_names_of(f.name) {
            Some(theirs) if theirs == ours => {}
            theirs => report.param_names.push(format!(
                "fn {}: Rust names ({}), header names ({})",
                f.name,
                ours.join(", "),
                theirs.map(|t| t.join(", ")).unwrap_or_else(|| "?".into())
            )),
        }
        let unmapped = |e: abi::UnmappedType| Error::Failed(format!("{}: {e}", f.name));
        let ptr = f.c_fn_ptr_type().map_err(unmapped)?;
        let prototype = f.c_prototype().map_err(unmapped)?;
        let header = pre.declaration_of(f.name).unwrap_or_default();
        assert(
            &mut tu,
            format!("devipc_same<decltype(&{}), {ptr}>::value", f.name),
            format!(
                "fn {}: Rust declares `{prototype}`; header declares `{header}`",
                f.name
            ),
        );
    }

    for t in &decls.types {
        if !pre.has_ident(t.name) {
            absent.push(format!("type {}", t.name));
            continue;
        }
        match t.kind {
            TypeKind::Alias => {
                let c = c_type(t.rust_type)?;
                assert(
                    &mut tu,
                    format!("devipc_same<{}, {c}>::value", t.name),
                    format!("type {}: Rust declares it as `{c}`", t.name),
                );
            }
            TypeKind::Enum | TypeKind::Struct => {
                assert(
                    &mut tu,
                    format!(
                        "sizeof({0}) == {1} && alignof({0}) == {2}",
                        t.name, t.size, t.align
                    ),
                    format!(
                        "type {}: Rust has size {} align {}",
                        t.name, t.size, t.align
                    ),
                );
            }
        }
    }

    for s in &decls.structs {
        if !pre.has_ident(s.name) {
            absent.push(format!("struct {}", s.name));
            continue;
        }
        report.present_structs.insert(s.name.to_owned());
        assert(
            &mut tu,
            format!(
                "sizeof({0}) == {1} && alignof({0}) == {2}",
                s.name, s.size, s.align
            ),
            format!(
                "struct {}: Rust has size {} align {}",
                s.name, s.size, s.align
            ),
        );
        for field in s.fields {
            let FieldDecl { offset, size, .. } = *field;
            let (name, ty) = (field.c_name(), c_type(field.rust_type)?);
            assert(
                &mut tu,
                format!("offsetof({}, {name}) == {offset}", s.name),
                format!("struct {}.{name}: Rust offset {offset}", s.name),
            );
            assert(
                &mut tu,
                format!("sizeof((({}*)0)->{name}) == {size}", s.name),
                format!("struct {}.{name}: Rust size {size}", s.name),
            );
            assert(
                &mut tu,
                format!(
                    "devipc_same<decltype((({}*)0)->{name}), {ty}>::value",
                    s.name
                ),
                format!("struct {}.{name}: Rust type `{ty}`", s.name),
            );
        }
    }

    for c in &decls.constants {
        let present = match c.kind {
            ConstKind::Devipc => {
                report.devipc_only.push(format!("{} = {}", c.name, c.value));
                continue;
            }
            // Older headers declare the runtime codes as `static const int32_t` rather
            // than `#define`: either form is checked the same way.
            ConstKind::Macro | ConstKind::LengthMacro | ConstKind::StaticConst => {
                pre.has_macro(c.name) || pre.has_ident(c.name)
            }
            ConstKind::Enumerator { .. } => pre.has_ident(c.name),
        };
        if !present {
            absent.push(format!("constant {} = {}", c.name, c.value));
            continue;
        }
        let value = c_literal(c.value, c.signed);
        assert(
            &mut tu,
            format!("({}) == {value}", c.name),
            format!("const {}: Rust value {}", c.name, c.value),
        );
        match c.kind {
            ConstKind::Macro | ConstKind::StaticConst => {
                assert(
                    &mut tu,
                    format!("sizeof({}) == {}", c.name, c.size),
                    format!(
                        "const {}: Rust type `{}` has size {}",
                        c.name, c.rust_type, c.size
                    ),
                );
                assert(
                    &mut tu,
                    format!("DEVIPC_SIGNED({}) == {}", c.name, c.signed),
                    format!(
                        "const {}: Rust type `{}` is {}",
                        c.name,
                        c.rust_type,
                        if c.signed { "signed" } else { "unsigned" }
                    ),
                );
            }
            ConstKind::Enumerator { enum_type } => {
                assert(
                    &mut tu,
                    format!("devipc_same<decltype({}), {enum_type}>::value", c.name),
                    format!("const {}: Rust puts it in enum `{enum_type}`", c.name),
                );
            }
            ConstKind::LengthMacro | ConstKind::Devipc => {}
        }
    }
    report.assertions = assertions;
    report.absent = absent;
    Ok(tu)
}
