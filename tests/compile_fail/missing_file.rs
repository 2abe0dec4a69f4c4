tgc::kernel!(bad: "no/such/graph.tgc");

fn main() {}
