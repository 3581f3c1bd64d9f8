//! What the headers declare: their preprocessed text, searched for the names the check
//! needs (is it declared at all, its parameter names, its declaration for messages).

use std::collections::BTreeSet;
use std::path::Path;

use super::{Error, Headers, compiler_args};

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
pub(super) struct Preprocessed {
    code: String,
    macros: BTreeSet<String>,
}

impl Preprocessed {
    /// Whether the headers `#define` `name`.
    pub(super) fn has_macro(&self, name: &str) -> bool {
        self.macros.contains(name)
    }

    /// Whether `name` occurs in the code as an identifier.
    pub(super) fn has_ident(&self, name: &str) -> bool {
        word_positions(&self.code, name).next().is_some()
    }

    /// Whether `name` occurs followed by `(`: a function declaration.
    pub(super) fn has_function(&self, name: &str) -> bool {
        word_positions(&self.code, name)
            .any(|i| self.code[i + name.len()..].trim_start().starts_with('('))
    }

    /// The parameter names of the header's declaration of `name` (empty for `()` and
    /// `(void)`).
    pub(super) fn param_names_of(&self, name: &str) -> Option<Vec<String>> {
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
    pub(super) fn declaration_of(&self, name: &str) -> Option<String> {
        let i = word_positions(&self.code, name)
            .find(|&i| self.code[i + name.len()..].trim_start().starts_with('('))?;
        let start = self.code[..i].rfind([';', '}', '{']).map_or(0, |s| s + 1);
        let end = i + self.code[i..].find([';', '{'])?;
        let decl = self.code[start..end].split_whitespace().collect::<Vec<_>>();
        Some(decl.join(" "))
    }
}

/// Preprocesses `headers` with `cxx` (`-E -dD`, the source written into `scratch`).
pub(super) fn preprocess(
    cxx: &str,
    headers: &Headers,
    scratch: &Path,
) -> Result<Preprocessed, Error> {
    let src = scratch.join("includes.cpp");
    let text: String = headers
        .includes
        .iter()
        .map(|h| format!("#include \"{h}\"\n"))
        .collect();
    std::fs::write(&src, text).map_err(|e| Error::Failed(format!("{}: {e}", src.display())))?;
    let out = compiler_args(cxx, headers)
        .args(["-E", "-dD"])
        .arg(&src)
        .output()
        .map_err(|e| Error::Failed(format!("cannot run {cxx}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "the headers do not preprocess:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
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
    Ok(Preprocessed { code, macros })
}
