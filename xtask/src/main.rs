//! `cargo xtask`: devipc's developer tools (see [`devipc_xtask::cli`] for the commands).

fn main() {
    std::process::exit(devipc_xtask::cli::main());
}
