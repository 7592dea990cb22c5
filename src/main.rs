fn main() {
    std::process::exit(pgdbg::cli::main());
}
