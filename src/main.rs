//! The `drover` binary: parses arguments and hands over to the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
