//! `cargo xtask header`: generates `include/devipc.h`, the C ABI's header, from the
//! `devipc-capi` crate (`capi/`) with cbindgen (`capi/cbindgen.toml`), and
//! `cargo xtask header --check` fails when the committed header differs from what the
//! sources generate (CI runs it through `capi/ci-check`).

use std::path::{Path, PathBuf};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The header's path under `root`.
pub fn header_path(root: &Path) -> PathBuf {
    root.join("include").join("devipc.h")
}

/// The header the sources under `root` generate.
pub fn generate(root: &Path) -> Result<String, String> {
    let capi = root.join("capi");
    let config = cbindgen::Config::from_file(capi.join("cbindgen.toml"))
        .map_err(|e| format!("capi/cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(capi.join("src").join("lib.rs"))
        .generate()
        .map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    let text = String::from_utf8(out).map_err(|e| format!("cbindgen wrote non-UTF-8: {e}"))?;
    Ok(parenthesize_negative_macros(&text))
}

/// `#define NAME -1` becomes `#define NAME (-1)`, so that the macro is one token group
/// wherever it is expanded (cbindgen writes negative constants bare).
pub fn parenthesize_negative_macros(header: &str) -> String {
    let mut out = String::with_capacity(header.len());
    for line in header.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let mut words = body.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("#define"), Some(name), Some(value))
                if value.starts_with('-') && value[1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                out.push_str(&format!("#define {name} ({value}){end}"));
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The committed header is what the sources generate.
    None,
    /// It differs: the first differing line (1-based) and the two versions of it.
    Differs {
        /// The line number.
        line: usize,
        /// The committed line (empty past its end).
        committed: String,
        /// The generated line (empty past its end).
        generated: String,
    },
}

/// Compares the committed header with `generated`.
pub fn compare(committed: &str, generated: &str) -> Drift {
    if committed == generated {
        return Drift::None;
    }
    let (mut a, mut b) = (committed.lines(), generated.lines());
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (x, y) => {
                return Drift::Differs {
                    line,
                    committed: x.unwrap_or_default().to_owned(),
                    generated: y.unwrap_or_default().to_owned(),
                };
            }
        }
    }
}

/// Writes the header (`check` false) or checks it (`check` true): what was done, or why it
/// failed (a drift included). The CLI prints either.
pub fn run(check: bool) -> Result<String, String> {
    let root = workspace_root();
    let path = header_path(&root);
    let generated = generate(&root).map_err(|e| format!("generating {}: {e}", path.display()))?;
    if !check {
        std::fs::write(&path, &generated)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        return Ok(format!("wrote {}", path.display()));
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    match compare(&committed, &generated) {
        Drift::None => Ok(format!("ok: {} is what capi/src generates", path.display())),
        Drift::Differs {
            line,
            committed,
            generated,
        } => Err(format!(
            "{} differs from what capi/src generates, first at line {line}:\n  \
             committed: {committed}\n  generated: {generated}\nrun `cargo xtask header` \
             and commit the result",
            path.display()
        )),
    }
}
