//! The reference server of the usage service. It arrives with issue 5.

fn main() {
    eprintln!("usage-server: the server arrives with issue 5; see README.md");
    std::process::exit(1);
}
