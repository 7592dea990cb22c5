fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(pgdbg::target::guardian::ARG) {
        std::process::exit(pgdbg::target::guardian::main(&args[2..]));
    }
    std::process::exit(pgdbg::cli::main());
}
