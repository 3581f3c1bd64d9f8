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

/// Writes the header (`check` false) or checks it (`check` true); returns the exit code
/// (0 ok, 1 drift or failure).
pub fn run(check: bool) -> i32 {
    let root = workspace_root();
    let path = header_path(&root);
    let generated = match generate(&root) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("FAILED: generating {}: {e}", path.display());
            return 1;
        }
    };
    if !check {
        return match std::fs::write(&path, &generated) {
            Ok(()) => {
                println!("wrote {}", path.display());
                0
            }
            Err(e) => {
                eprintln!("FAILED: writing {}: {e}", path.display());
                1
            }
        };
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    match compare(&committed, &generated) {
        Drift::None => {
            println!("ok: {} is what capi/src generates", path.display());
            0
        }
        Drift::Differs {
            line,
            committed,
            generated,
        } => {
            eprintln!(
                "FAILED: {} differs from what capi/src generates, first at line {line}:\n  \
                 committed: {committed}\n  generated: {generated}\nrun `cargo xtask header` \
                 and commit the result",
                path.display()
            );
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_macros_are_parenthesized() {
        assert_eq!(
            parenthesize_negative_macros("#define A -1\n#define B 2\n#define C -x\nint x;"),
            "#define A (-1)\n#define B 2\n#define C -x\nint x;"
        );
    }

    #[test]
    fn drift_names_the_first_differing_line() {
        assert_eq!(compare("a\nb\n", "a\nb\n"), Drift::None);
        assert_eq!(
            compare("a\nb\n", "a\nc\n"),
            Drift::Differs {
                line: 2,
                committed: "b".into(),
                generated: "c".into()
            }
        );
        assert_eq!(
            compare("a\n", "a\nx\n"),
            Drift::Differs {
                line: 2,
                committed: String::new(),
                generated: "x".into()
            }
        );
    }
}
