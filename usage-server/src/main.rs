//! `usage-server`: the reference server and its admin commands (contract section 10).

fn main() {
    std::process::exit(usage_server::cli::main());
}
