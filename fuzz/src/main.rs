//! `tgc-fuzz TARGET`: feeds AFL++'s inputs to one target of
//! `tgc_core::fuzz::TARGETS` (see `scripts/fuzz.sh`).

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(&(_, target)) = tgc_core::fuzz::TARGETS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = tgc_core::fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: tgc-fuzz TARGET (one of {})", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| target(data));
}
