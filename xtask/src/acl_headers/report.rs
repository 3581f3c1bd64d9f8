//! The outcome of one check, and how it is shown.

use std::collections::BTreeSet;

use devipc_ascend_sys::AclApi;

/// The outcome of one check.
#[derive(Debug, Default)]
pub struct Report {
    /// Number of assertions compiled.
    pub assertions: usize,
    /// Failed assertions: what Rust declares vs the header.
    pub mismatches: Vec<String>,
    /// Declarations the header does not have.
    pub absent: Vec<String>,
    /// Constants that are devipc's own names, not the headers'.
    pub devipc_only: Vec<String>,
    /// Functions whose parameter names differ from the header's (not an ABI matter, but
    /// the list promises the header's names).
    pub param_names: Vec<String>,
    /// Functions the header declares.
    pub present_functions: BTreeSet<String>,
    /// Structs the header declares.
    pub present_structs: BTreeSet<String>,
}

impl Report {
    /// What makes the crate's declarations wrong for the headers `what`: a mismatch, a
    /// parameter name that differs, a required function the header lacks (it must be
    /// optional). Empty when the crate passes; absent optional declarations are notes.
    pub fn crate_failures(&self, what: &str) -> Vec<String> {
        let mut failures = Vec::new();
        if !self.mismatches.is_empty() {
            failures.push(format!(
                "{} declaration(s) of devipc-ascend-sys disagree with {what}:\n{}",
                self.mismatches.len(),
                self.mismatches.join("\n")
            ));
        }
        if !self.param_names.is_empty() {
            failures.push(format!(
                "parameter names differ from {what}:\n{}",
                self.param_names.join("\n")
            ));
        }
        for name in AclApi::REQUIRED_SYMBOLS {
            if !self.present_functions.contains(*name) {
                failures.push(format!(
                    "required function {name} is not declared by {what}: it must be optional"
                ));
            }
        }
        failures
    }

    /// Prints the outcome of the check against `what`: the [`summary`](Self::summary) to
    /// the real stderr, past libtest's capture, so the notes about an older header are
    /// seen on every run; the full list of absent constants through `eprintln!`, which a
    /// test shows only with `--nocapture`.
    pub fn print(&self, what: &str) {
        let _ = std::io::Write::write_all(&mut std::io::stderr(), self.summary(what).as_bytes());
        let names = self.absent_constants();
        if names.len() > 10 {
            eprintln!("  constants absent from {what}: {}", names.join(", "));
        }
    }

    /// The names of the constants the header does not declare.
    fn absent_constants(&self) -> Vec<&str> {
        self.absent
            .iter()
            .filter_map(|a| a.strip_prefix("constant ")?.split(' ').next())
            .collect()
    }

    /// The outcome of the check against `what`, one line per note: counts, absent
    /// declarations (at most ten constants by name), devipc's own constants, parameter
    /// names that differ, mismatches.
    pub fn summary(&self, what: &str) -> String {
        let mut out = format!(
            "ABI check against {what}: {} assertions, {} mismatches, {} declarations not in the header\n",
            self.assertions,
            self.mismatches.len(),
            self.absent.len()
        );
        for a in self.absent.iter().filter(|a| !a.starts_with("constant ")) {
            out += &format!("  note: not checked, absent from the header: {a}\n");
        }
        let names = self.absent_constants();
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
            }
        }
        for d in &self.devipc_only {
            out +=
                &format!("  note: devipc's own constant, not in the headers, not checked: {d}\n");
        }
        for p in &self.param_names {
            out += &format!("  PARAMETER NAMES: {p}\n");
        }
        for m in &self.mismatches {
            out += &format!("  MISMATCH: {m}\n");
        }
        out
    }
}
