//! `usage-server`: the reference server and its admin commands (contract section 10).

/// mimalloc rather than the system's allocator: glibc's returns a query's freed scratch
/// memory to the OS and faults it in again on the next query, which cost up to half the
/// time of a distinct count over a million rows.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(usage_server::cli::main());
}
