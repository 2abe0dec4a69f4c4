// The report of the tests that force each CPU instruction set through a
// dispatcher, one definition `include!`d by tgc-runtime's `cpu_rt` tests
// and tgc-core's `emit` tests into a module where `Isa` is
// `tgc_runtime::cpu_rt::Isa`.

/// Prints `ISA paths (WHAT): ran N (…), skipped M (NAME: not on this CPU, …)`
/// for the instruction sets a test ran and skipped, and panics unless
/// together they are [`Isa::ALL`] once each, or when `TGC_REQUIRE_ISA`
/// (names separated by commas; `scripts/test.sh` sets it from the CPU's
/// flags in `/proc/cpuinfo`) names one that was skipped, or no ISA at all.
pub fn isa_paths(what: &str, ran: &[Isa], skipped: &[Isa]) {
    let names = |v: &[Isa], note: &str| v.iter().map(|i| format!("{}{note}", i.name())).collect::<Vec<_>>().join(", ");
    eprintln!(
        "ISA paths ({what}): ran {} ({}), skipped {} ({})",
        ran.len(),
        names(ran, ""),
        skipped.len(),
        names(skipped, ": not on this CPU")
    );
    let mut all: Vec<Isa> = ran.iter().chain(skipped).copied().collect();
    all.sort();
    assert_eq!(all, Isa::ALL, "{what}: the paths ran and skipped are not the dispatcher's");
    if let Ok(required) = std::env::var("TGC_REQUIRE_ISA") {
        for name in required.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let isa = Isa::by_name(name).unwrap_or_else(|| panic!("TGC_REQUIRE_ISA: no ISA `{name}`"));
            assert!(ran.contains(&isa), "{what}: TGC_REQUIRE_ISA has {name}, but its path was skipped");
        }
    }
}
