fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(pgdbg::inferior::guardian::ARG) {
        std::process::exit(pgdbg::inferior::guardian::main(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some(pgdbg::perf::keeper::ARG) {
        std::process::exit(pgdbg::perf::keeper::main(&args[2..]));
    }
    pgdbg::perf::keeper::enable();
    let code = pgdbg::cli::main();
    // a uprobe's close under way is finished; the rest is the keeper's
    pgdbg::perf::keeper::finish();
    std::process::exit(code);
}
