fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The protocol families beside http plug into the shared layers here.
    sluice::stream::register();
    sluice::mail::register();
    std::process::exit(sluice::process::main_entry(&args));
}
