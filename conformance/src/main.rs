//! `devipc-conformance`: runs the rule catalogue on the chosen backends (see
//! [`devipc_conformance::cli`] for the options and exit codes).

fn main() {
    std::process::exit(devipc_conformance::cli::main());
}
