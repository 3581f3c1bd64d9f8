//! Checks every declaration of this crate against the real ACL headers.
//!
//! The headers ship inside the `torch-npu` wheel on PyPI (`torch_npu/include/acl/` in
//! current wheels, `torch_npu/include/third_party/acl/inc/acl/` in older ones). The test
//! downloads pinned wheels with `pip download --no-deps`, extracts only the `acl` header
//! directories into `<target dir>/acl-headers/` (reused on later runs; nothing vendor is
//! ever written into the source tree), and then compiles one C++ translation unit,
//! generated from [`devipc_ascend_sys::abi`], that includes the headers and asserts:
//!
//! - every function of `for_each_acl_fn!`: its address has exactly the type of the C
//!   prototype spelled from the Rust declaration;
//! - every type: a plain typedef is the same type, an enum has the same size and
//!   alignment, a struct the same size, alignment, field offsets, field sizes and field
//!   types;
//! - every constant: the value; for `#define`s and `static const int`s also the size and
//!   signedness of the C type; for enumerators, that they belong to the enum named.
//!
//! C++ rather than C, because the ACL-layer error codes are `static const int`, which C
//! does not accept in a constant expression, and because C would let an enum parameter
//! pass for `unsigned int`. Every failed assertion is reported (the compiler keeps
//! going), each with what Rust declares and, for functions, what the header declares.
//! A function or constant the fetched header does not declare (an older header) is
//! printed as a note, not a failure; the required functions and the structs must be
//! present.
//!
//! Without Python/pip, network or a C++ compiler the tests print `SKIPPED: ...` and pass,
//! unless `DEVIPC_NO_SKIP=1`, which makes them fail. `DEVIPC_ACL_INCLUDE=<dir>` (a CANN
//! `include` directory holding `acl/acl_rt.h`) additionally checks a local install;
//! `DEVIPC_ACL_HEADERS_CACHE=<dir>` moves the download cache (e.g. for CI caching).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::abi::{
    self, ConstDecl, ConstKind, FieldDecl, FnDecl, ParamDecl, StructDecl, TypeDecl, TypeKind,
};
use serial_test::parallel;

// ---------------------------------------------------------------------------------------
// Where the headers come from.

/// A pinned torch-npu wheel whose headers are checked.
struct Wheel {
    version: &'static str,
    python: &'static str,
    platform: &'static str,
}

/// The newest torch-npu at the time of writing (ACL 1.17.0 headers, CANN 8.5/9.x).
const NEWEST: Wheel = Wheel {
    version: "2.14.0",
    python: "3.11",
    platform: "manylinux_2_28_x86_64",
};

/// A late-2024 torch-npu, whose vendored headers predate the IPC-key, notify-IPC and
/// shareable-handle APIs: the test that the required/optional split holds.
const OLD_2024: Wheel = Wheel {
    version: "2.1.0.post8",
    python: "3.9",
    platform: "manylinux2014_x86_64",
};

/// Reports that the ABI check cannot run here: loudly, or a failure under DEVIPC_NO_SKIP=1.
fn skip(reason: &str) {
    devipc_testkit::skip("the ACL ABI check against the torch-npu headers", reason);
}

/// `$DEVIPC_ACL_HEADERS_CACHE` if set, else `<target dir>/acl-headers`, next to
/// `CARGO_TARGET_TMPDIR` (`<target dir>/tmp`).
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("DEVIPC_ACL_HEADERS_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("acl-headers")
}

/// The directory `D` under `root` with `D/acl/acl_rt.h`, preferring the shallowest.
fn find_include_root(root: &Path) -> Option<PathBuf> {
    let mut stack = vec![root.to_path_buf()];
    let mut found: Vec<PathBuf> = Vec::new();
    while let Some(dir) = stack.pop() {
        if dir.join("acl").join("acl_rt.h").is_file() {
            found.push(dir.clone());
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    found.sort_by_key(|p| p.components().count());
    found.into_iter().next()
}

fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Revision of the extraction rule; a cache written by another revision is refetched.
const EXTRACT_REV: u32 = 2;

/// Returns the include root of the wheel's ACL headers, downloading and extracting them
/// on first use. `Err` means "cannot fetch here" (no Python, pip or network).
fn fetch_headers(wheel: &Wheel) -> Result<PathBuf, String> {
    let dest = cache_root().join(format!("torch-npu-{}", wheel.version));
    let marker = format!("torch-npu {} extract rev {EXTRACT_REV}", wheel.version);
    if std::fs::read_to_string(dest.join(".complete")).is_ok_and(|m| m == marker) {
        if let Some(root) = find_include_root(&dest) {
            return Ok(root);
        }
    }
    let python = python().ok_or("no python3/python on PATH to run pip")?;
    let work = cache_root().join(format!(
        "torch-npu-{}.partial-{}",
        wheel.version,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let wheel_dir = work.join("wheel");
    let out = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args([
            "--disable-pip-version-check",
            "--quiet",
            "--timeout",
            "60",
            "--retries",
            "2",
        ])
        .args([
            "--platform",
            wheel.platform,
            "--python-version",
            wheel.python,
        ])
        .arg(format!("torch-npu=={}", wheel.version))
        .arg("-d")
        .arg(&wheel_dir)
        .output()
        .map_err(|e| format!("cannot run {python} -m pip: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&work);
        return Err(format!(
            "pip download torch-npu=={} failed: {}",
            wheel.version,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let whl = std::fs::read_dir(&wheel_dir)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or("pip reported success but left no .whl")?;
    // Extract only the ACL header directories (and `ge/`, which old `acl_base.h` includes
    // for the GE error codes).
    const EXTRACT: &str = r#"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist()
         if n.endswith(".h") and any(d in n for d in ("/include/acl/", "/inc/acl/", "/inc/ge/"))]
z.extractall(sys.argv[2], names)
print(len(names))
"#;
    let include_dir = work.join("headers");
    let out = Command::new(python)
        .args(["-c", EXTRACT])
        .arg(&whl)
        .arg(&include_dir)
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    assert!(
        out.status.success(),
        "extracting headers from {} failed: {}",
        whl.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&wheel_dir).map_err(|e| e.to_string())?;
    std::fs::write(work.join(".complete"), &marker).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dest);
    if std::fs::rename(&work, &dest).is_err() {
        // Another test process finished the same download first: use its copy.
        let _ = std::fs::remove_dir_all(&work);
    }
    let root = find_include_root(&dest);
    // The wheel was fetched: headers missing from it is a finding, not a skip.
    Ok(root.unwrap_or_else(|| {
        panic!(
            "torch-npu {} has no acl/acl_rt.h (layout changed?); looked in {}",
            wheel.version,
            dest.display()
        )
    }))
}

fn cxx() -> Option<String> {
    let candidates = std::env::var("CXX").ok().into_iter().chain([
        "g++".to_owned(),
        "c++".to_owned(),
        "clang++".to_owned(),
    ]);
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

// ---------------------------------------------------------------------------------------
// The generator.

/// What to check: a copy of the crate's records (or a deliberately altered one).
#[derive(Clone)]
struct Decls {
    functions: Vec<FnDecl>,
    types: Vec<TypeDecl>,
    structs: Vec<StructDecl>,
    constants: Vec<ConstDecl>,
}

impl Decls {
    fn of_crate() -> Self {
        Decls {
            functions: abi::FUNCTIONS.to_vec(),
            types: abi::types().copied().collect(),
            structs: abi::STRUCTS.to_vec(),
            constants: abi::constants().copied().collect(),
        }
    }
}

/// Which headers to include, from where.
struct Headers {
    include_dirs: Vec<PathBuf>,
    includes: Vec<&'static str>,
}

impl Headers {
    fn acl(root: &Path) -> Self {
        Headers {
            include_dirs: vec![root.to_path_buf(), root.join("acl")],
            includes: vec!["acl/acl.h", "acl/acl_rt.h"],
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Default)]
struct Report {
    /// Number of assertions compiled.
    assertions: usize,
    /// Failed assertions: what Rust declares vs the header.
    mismatches: Vec<String>,
    /// Declarations the header does not have.
    absent: Vec<String>,
    /// Constants that are devipc's own names, not the headers'.
    devipc_only: Vec<String>,
    /// Functions whose parameter names differ from the header's (not an ABI matter, but
    /// the list promises the header's names).
    param_names: Vec<String>,
    /// Functions the header declares.
    present_functions: BTreeSet<String>,
    /// Structs the header declares.
    present_structs: BTreeSet<String>,
}

/// Positions of `word` in `text` as a whole identifier.
fn word_positions<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).map(|(i, _)| i).filter(move |&i| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The preprocessed headers: code (without `#` lines) and the macro names defined.
struct Preprocessed {
    code: String,
    macros: BTreeSet<String>,
}

impl Preprocessed {
    fn has_macro(&self, name: &str) -> bool {
        self.macros.contains(name)
    }
    fn has_ident(&self, name: &str) -> bool {
        word_positions(&self.code, name).next().is_some()
    }
    fn has_function(&self, name: &str) -> bool {
        word_positions(&self.code, name)
            .any(|i| self.code[i + name.len()..].trim_start().starts_with('('))
    }
    /// The parameter names of the header's declaration of `name` (empty for `()` and
    /// `(void)`).
    fn param_names_of(&self, name: &str) -> Option<Vec<String>> {
        let decl = self.declaration_of(name)?;
        let open = word_positions(&decl, name).next()? + name.len();
        let open = open + decl[open..].find('(')?;
        let mut depth = 0usize;
        let mut close = None;
        for (i, ch) in decl[open..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = decl[open + 1..close?].trim();
        if inner.is_empty() || inner == "void" {
            return Some(Vec::new());
        }
        let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        Some(
            inner
                .split(',')
                .map(|param| {
                    let param = param.split('[').next().unwrap_or(param).trim_end();
                    let start = param.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
                    param[start..].to_owned()
                })
                .collect(),
        )
    }

    /// The header's declaration of `name`, whitespace collapsed, for messages.
    fn declaration_of(&self, name: &str) -> Option<String> {
        let i = word_positions(&self.code, name)
            .find(|&i| self.code[i + name.len()..].trim_start().starts_with('('))?;
        let start = self.code[..i].rfind([';', '}', '{']).map_or(0, |s| s + 1);
        let end = i + self.code[i..].find([';', '{'])?;
        let decl = self.code[start..end].split_whitespace().collect::<Vec<_>>();
        Some(decl.join(" "))
    }
}

fn compiler_args(cxx: &str, headers: &Headers) -> Command {
    let mut cmd = Command::new(cxx);
    cmd.args(["-std=c++11", "-x", "c++", "-w"]);
    for dir in &headers.include_dirs {
        cmd.arg("-I").arg(dir);
    }
    cmd
}

fn preprocess(cxx: &str, headers: &Headers, scratch: &Path) -> Preprocessed {
    let src = scratch.join("includes.cpp");
    let text: String = headers
        .includes
        .iter()
        .map(|h| format!("#include \"{h}\"\n"))
        .collect();
    std::fs::write(&src, text).unwrap();
    let out = compiler_args(cxx, headers)
        .args(["-E", "-dD"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the headers do not preprocess:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = String::from_utf8_lossy(&out.stdout);
    let mut code = String::new();
    let mut macros = BTreeSet::new();
    for line in all.lines() {
        if let Some(rest) = line.strip_prefix("#define ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            macros.insert(name);
        } else if !line.starts_with('#') {
            code.push_str(line);
            code.push('\n');
        }
    }
    Preprocessed { code, macros }
}

fn c_type(rust: &str) -> String {
    abi::c_type_name(rust).unwrap_or_else(|e| panic!("{e}"))
}

fn c_literal(value: i128, signed: bool) -> String {
    if signed {
        format!("{value}LL")
    } else {
        format!("{value}ULL")
    }
}

/// Builds the checking translation unit and the list of absent declarations.
fn generate(decls: &Decls, headers: &Headers, pre: &Preprocessed, report: &mut Report) -> String {
    let mut tu = String::new();
    for h in &headers.includes {
        writeln!(tu, "#include \"{h}\"").unwrap();
    }
    tu += "#include <stddef.h>\n#include <stdint.h>\n";
    tu += "template <class A, class B> struct devipc_same { enum { value = 0 }; };\n";
    tu += "template <class A> struct devipc_same<A, A> { enum { value = 1 }; };\n";
    tu += "#define DEVIPC_SIGNED(x) (((x) * 0 - 1) < 0)\n";
    let mut assert = |tu: &mut String, cond: String, msg: String| {
        report.assertions += 1;
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
        let ptr = f
            .c_fn_ptr_type()
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let header = pre.declaration_of(f.name).unwrap_or_default();
        assert(
            &mut tu,
            format!("devipc_same<decltype(&{}), {ptr}>::value", f.name),
            format!(
                "fn {}: Rust declares `{}`; header declares `{header}`",
                f.name,
                f.c_prototype().unwrap()
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
                let c = c_type(t.rust_type);
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
            let (name, ty) = (field.c_name(), c_type(field.rust_type));
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
    report.absent = absent;
    tu
}

/// Runs the whole check of `decls` against `headers`.
fn check(decls: &Decls, headers: &Headers, cxx: &str, scratch: &Path) -> Report {
    std::fs::create_dir_all(scratch).unwrap();
    let pre = preprocess(cxx, headers, scratch);
    let mut report = Report::default();
    let tu = generate(decls, headers, &pre, &mut report);
    let src = scratch.join("abi_check.cpp");
    std::fs::write(&src, &tu).unwrap();
    let out = compiler_args(cxx, headers)
        .args(["-fsyntax-only", "-fmax-errors=0"])
        .arg(&src)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut other_errors = Vec::new();
    for line in stderr.lines().filter(|l| l.contains("error")) {
        match line.split_once("DEVIPC-MISMATCH ") {
            Some((_, msg)) => report.mismatches.push(msg.trim_end_matches('"').to_owned()),
            None => other_errors.push(line.to_owned()),
        }
    }
    assert!(
        other_errors.is_empty(),
        "the generated check ({}) does not compile for reasons other than a mismatch:\n{}",
        src.display(),
        other_errors.join("\n")
    );
    assert_eq!(
        out.status.success(),
        report.mismatches.is_empty(),
        "compiler status and mismatch list disagree:\n{stderr}"
    );
    report
}

/// Prints the outcome. The summary goes to the real stderr, past libtest's capture, so
/// the notes about an older header are seen on every run; the full list of absent
/// constants only with `--nocapture`.
fn print_report(what: &str, report: &Report) {
    let mut out = format!(
        "ABI check against {what}: {} assertions, {} mismatches, {} declarations not in the header\n",
        report.assertions,
        report.mismatches.len(),
        report.absent.len()
    );
    let (constants, others): (Vec<&String>, Vec<&String>) = report
        .absent
        .iter()
        .partition(|a| a.starts_with("constant "));
    for a in others {
        out += &format!("  note: not checked, absent from the header: {a}\n");
    }
    let names: Vec<&str> = constants
        .iter()
        .filter_map(|a| a.strip_prefix("constant ")?.split(' ').next())
        .collect();
    match names.len() {
        0 => {}
        1..=10 => {
            out += &format!(
                "  note: not checked, constants absent from the header: {}\n",
                names.join(", ")
            );
        }
        n => {
            out += &format!(
                "  note: not checked, {n} constants absent from the header, e.g. {} (all: --nocapture)\n",
                names[..5].join(", ")
            );
            eprintln!("  constants absent from {what}: {}", names.join(", "));
        }
    }
    for d in &report.devipc_only {
        out += &format!("  note: devipc's own constant, not in the headers, not checked: {d}\n");
    }
    for p in &report.param_names {
        out += &format!("  PARAMETER NAMES: {p}\n");
    }
    for m in &report.mismatches {
        out += &format!("  MISMATCH: {m}\n");
    }
    let _ = std::io::Write::write_all(&mut std::io::stderr(), out.as_bytes());
}

/// The full check of the crate against one header set, with the core-set requirements.
fn check_crate_against(what: &str, root: &Path, cxx: &str, scratch: &Path) -> Report {
    let report = check(&Decls::of_crate(), &Headers::acl(root), cxx, scratch);
    print_report(what, &report);
    assert!(
        report.mismatches.is_empty(),
        "{} declaration(s) of devipc-ascend-sys disagree with {what}:\n{}",
        report.mismatches.len(),
        report.mismatches.join("\n")
    );
    assert!(
        report.param_names.is_empty(),
        "parameter names differ from {what}:\n{}",
        report.param_names.join("\n")
    );
    for name in AclApi::REQUIRED_SYMBOLS {
        assert!(
            report.present_functions.contains(*name),
            "required function {name} is not declared by {what}: it must be optional"
        );
    }
    report
}

fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("devipc-ascend-sys-abi")
        .join(name)
}

// ---------------------------------------------------------------------------------------
// Deliberately wrong declarations: the check must catch each one.

const WRONG_MALLOC_PHYSICAL_PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "handle",
        rust_type: "*mut aclrtDrvMemHandle",
    },
    ParamDecl {
        name: "size",
        rust_type: "usize",
    },
    ParamDecl {
        name: "prop",
        // The header has `const aclrtPhysicalMemProp *`.
        rust_type: "*mut aclrtPhysicalMemProp",
    },
    ParamDecl {
        name: "flags",
        rust_type: "u64",
    },
];

const WRONG_NOTIFY_KEY_PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "notify",
        rust_type: "aclrtNotify",
    },
    ParamDecl {
        name: "key",
        rust_type: "*mut c_char",
    },
    ParamDecl {
        name: "len",
        rust_type: "usize",
    },
    ParamDecl {
        name: "flags",
        // The header has `uint64_t`.
        rust_type: "u32",
    },
];

const RENAMED_FREE_PHYSICAL_PARAMS: &[ParamDecl] = &[ParamDecl {
    // The header calls it `handle`.
    name: "memHandle",
    rust_type: "aclrtDrvMemHandle",
}];

/// The crate's records with one error of each kind planted; returns the names of the
/// planted errors, each of which must appear in a mismatch message.
fn plant_errors(decls: &mut Decls) -> Vec<&'static str> {
    let mut planted = Vec::new();
    for f in &mut decls.functions {
        match f.name {
            "aclrtMallocPhysical" => {
                f.params = WRONG_MALLOC_PHYSICAL_PARAMS;
                planted.push("fn aclrtMallocPhysical");
            }
            "aclrtNotifyGetExportKey" => {
                f.params = WRONG_NOTIFY_KEY_PARAMS;
                planted.push("fn aclrtNotifyGetExportKey");
            }
            "aclrtGetDeviceCount" => {
                f.ret = "u32";
                planted.push("fn aclrtGetDeviceCount");
            }
            _ => {}
        }
    }
    for c in &mut decls.constants {
        match c.name {
            // The classic mistake: the notify flag is 0x02, not 0x1 as for memory.
            "ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION" => {
                c.value = 1;
                planted.push("const ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: Rust value");
            }
            "ACL_NOTIFY_DEVICE_USE_ONLY" => {
                c.size = 8;
                planted.push("const ACL_NOTIFY_DEVICE_USE_ONLY: Rust type `u32` has size 8");
            }
            "ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION" => {
                c.signed = true;
                planted.push("const ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION: Rust type `u64` is signed");
            }
            "ACL_ERROR_RT_INVALID_HANDLE" => {
                c.value = 107018;
                planted.push("const ACL_ERROR_RT_INVALID_HANDLE");
            }
            "ACL_ERROR_REPEAT_FINALIZE" => {
                c.value = 100036;
                planted.push("const ACL_ERROR_REPEAT_FINALIZE");
            }
            "ACL_MEM_HANDLE_TYPE_NONE" => {
                c.kind = ConstKind::Enumerator {
                    enum_type: "aclrtMemAttr",
                };
                planted.push("const ACL_MEM_HANDLE_TYPE_NONE: Rust puts it in enum `aclrtMemAttr`");
            }
            _ => {}
        }
    }
    for t in &mut decls.types {
        match t.name {
            "aclError" => {
                t.rust_type = "u32";
                planted.push("type aclError");
            }
            "aclrtMemcpyKind" => {
                t.size = 8;
                planted.push("type aclrtMemcpyKind");
            }
            _ => {}
        }
    }
    for s in &mut decls.structs {
        if s.name == "aclrtPhysicalMemProp" {
            let mut fields = s.fields.to_vec();
            fields[4].offset = 20; // `reserve` is at 24, after 4 bytes of padding
            s.fields = Box::leak(fields.into_boxed_slice());
            planted.push("struct aclrtPhysicalMemProp.reserve: Rust offset 20");
        }
        if s.name == "aclrtMemAccessDesc" {
            let mut fields = s.fields.to_vec();
            fields[2].rust_type = "[u8; 16]";
            s.fields = Box::leak(fields.into_boxed_slice());
            planted.push("struct aclrtMemAccessDesc.rsv: Rust type `uint8_t[16]`");
        }
    }
    planted
}

fn assert_all_planted_errors_found(report: &Report, planted: &[&str]) {
    for p in planted {
        assert!(
            report.mismatches.iter().any(|m| m.starts_with(p)),
            "the planted error `{p}` was not reported; mismatches:\n{}",
            report.mismatches.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------
// The tests.

/// The crate against the newest torch-npu headers; then the same headers with planted
/// errors, which must all be caught.
#[test]
#[parallel]
fn abi_matches_the_newest_torch_npu_headers() {
    let Some(cxx) = cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let root = match fetch_headers(&NEWEST) {
        Ok(root) => root,
        Err(e) => {
            return skip(&format!(
                "cannot fetch torch-npu {} headers: {e}",
                NEWEST.version
            ));
        }
    };
    let what = format!("torch-npu {} headers ({})", NEWEST.version, root.display());
    let report = check_crate_against(&what, &root, &cxx, &scratch("newest"));
    // The newest header declares every function and struct devipc uses.
    for f in abi::FUNCTIONS {
        assert!(
            report.present_functions.contains(f.name),
            "{} is missing from {what}",
            f.name
        );
    }
    for s in abi::STRUCTS {
        assert!(
            report.present_structs.contains(s.name),
            "struct {} is missing from {what}",
            s.name
        );
    }

    let mut wrong = Decls::of_crate();
    let planted = plant_errors(&mut wrong);
    let report = check(
        &wrong,
        &Headers::acl(&root),
        &cxx,
        &scratch("newest-planted"),
    );
    assert_all_planted_errors_found(&report, &planted);
    assert_eq!(
        report.mismatches.len(),
        planted.len(),
        "unexpected extra mismatches:\n{}",
        report.mismatches.join("\n")
    );
}

/// The crate against a late-2024 torch-npu: what it declares must match, the newer
/// families are absent (notes), and every required function is present, which is what
/// makes them safe to require.
#[test]
#[parallel]
fn required_functions_exist_in_the_2024_headers() {
    let Some(cxx) = cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let root = match fetch_headers(&OLD_2024) {
        Ok(root) => root,
        Err(e) => {
            return skip(&format!(
                "cannot fetch torch-npu {} headers: {e}",
                OLD_2024.version
            ));
        }
    };
    let what = format!(
        "torch-npu {} headers ({})",
        OLD_2024.version,
        root.display()
    );
    let report = check_crate_against(&what, &root, &cxx, &scratch("old-2024"));
    assert!(
        report
            .absent
            .iter()
            .any(|a| a.starts_with("function aclrtIpcMemGetExportKey")),
        "expected the 2024 header to predate the IPC-key API: {:?}",
        report.absent
    );
}

/// A local CANN install named by DEVIPC_ACL_INCLUDE, when set.
#[test]
#[parallel]
fn abi_matches_local_acl_headers_if_named() {
    let Some(dir) = std::env::var_os("DEVIPC_ACL_INCLUDE") else {
        eprintln!("note: DEVIPC_ACL_INCLUDE is not set; no local CANN headers to check");
        return;
    };
    let Some(cxx) = cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let root = find_include_root(Path::new(&dir))
        .unwrap_or_else(|| panic!("no acl/acl_rt.h under DEVIPC_ACL_INCLUDE={dir:?}"));
    let what = format!("local headers {}", root.display());
    check_crate_against(&what, &root, &cxx, &scratch("local"));
}

/// The generator itself, without any download: a small header written here (devipc's own
/// restatement of a few ACL declarations) passes with the crate's records and fails with
/// wrong ones, and what it lacks is reported as absent.
#[test]
#[parallel]
fn generator_catches_wrong_declarations_offline() {
    let Some(cxx) = cxx() else {
        return skip("no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check");
    };
    let dir = scratch("offline");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mini_acl.h"),
        r#"
#include <stddef.h>
#include <stdint.h>
typedef int aclError;
typedef void *aclrtDrvMemHandle;
typedef void *aclrtNotify;
static const int ACL_ERROR_INVALID_PARAM = 100000;
#define ACL_ERROR_RT_NO_PERMISSION 207006
#define ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x02UL
typedef enum aclrtMemLocationType { ACL_MEM_LOCATION_TYPE_HOST = 0, ACL_MEM_LOCATION_TYPE_DEVICE } aclrtMemLocationType;
typedef struct aclrtMemLocation { uint32_t id; aclrtMemLocationType type; } aclrtMemLocation;
#ifdef __cplusplus
extern "C" {
#endif
aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint64_t flags);
#ifdef __cplusplus
}
#endif
"#,
    )
    .unwrap();
    let headers = Headers {
        include_dirs: vec![dir.clone()],
        includes: vec!["mini_acl.h"],
    };
    let pick = |names: &[&str]| -> Decls {
        let all = Decls::of_crate();
        Decls {
            functions: all
                .functions
                .into_iter()
                .filter(|f| names.contains(&f.name))
                .collect(),
            types: all
                .types
                .into_iter()
                .filter(|t| names.contains(&t.name))
                .collect(),
            structs: all
                .structs
                .into_iter()
                .filter(|s| names.contains(&s.name))
                .collect(),
            constants: all
                .constants
                .into_iter()
                .filter(|c| names.contains(&c.name))
                .collect(),
        }
    };
    let names = [
        "aclrtFreePhysical",
        "aclrtNotifyGetExportKey",
        "aclrtMapMem", // not in the mini header: absent
        "aclError",
        "aclrtDrvMemHandle",
        "aclrtMemLocationType",
        "aclrtMemLocation",
        "ACL_ERROR_INVALID_PARAM",
        "ACL_ERROR_RT_NO_PERMISSION",
        "ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION",
        "ACL_MEM_LOCATION_TYPE_DEVICE",
        "ACL_MEM_LOCATION_TYPE_MANAGED", // not in the mini header: absent
    ];
    let good = pick(&names);
    let report = check(&good, &headers, &cxx, &dir.join("good"));
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert!(report.param_names.is_empty(), "{:?}", report.param_names);
    assert!(report.assertions > 15, "{}", report.assertions);
    assert_eq!(
        report.absent,
        [
            "function aclrtMapMem (required)",
            "constant ACL_MEM_LOCATION_TYPE_MANAGED = 3"
        ]
    );

    let mut bad = good.clone();
    for f in &mut bad.functions {
        if f.name == "aclrtNotifyGetExportKey" {
            f.params = WRONG_NOTIFY_KEY_PARAMS;
        }
        if f.name == "aclrtFreePhysical" {
            f.params = RENAMED_FREE_PHYSICAL_PARAMS;
        }
    }
    for c in &mut bad.constants {
        if c.name == "ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION" {
            c.value = 1;
        }
        if c.name == "ACL_ERROR_INVALID_PARAM" {
            c.signed = false;
        }
    }
    for t in &mut bad.types {
        if t.name == "aclrtDrvMemHandle" {
            t.rust_type = "*mut *mut c_void";
        }
    }
    for s in &mut bad.structs {
        let mut fields = s.fields.to_vec();
        fields[1].offset = 8;
        s.fields = Box::leak(fields.into_boxed_slice());
    }
    let report = check(&bad, &headers, &cxx, &dir.join("bad"));
    let expected = [
        "fn aclrtNotifyGetExportKey: Rust declares `aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint32_t flags)`; header declares `aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint64_t flags)`",
        "type aclrtDrvMemHandle: Rust declares it as `void **`",
        "struct aclrtMemLocation.type: Rust offset 8",
        "const ACL_ERROR_INVALID_PARAM: Rust type `aclError` is unsigned",
        "const ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: Rust value 1",
    ];
    let mut got = report.mismatches.clone();
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(got, want);
    // A renamed parameter is not an ABI mismatch, but it is reported.
    assert_eq!(
        report.param_names,
        ["fn aclrtFreePhysical: Rust names (memHandle), header names (handle)"]
    );
}
