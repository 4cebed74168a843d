fn main() {
    std::process::exit(plumb_cli::main());
}
