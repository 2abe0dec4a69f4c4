tgc::kernel!(bad:
    graph main(x: f32[4]) -> (z: f32[4]) {
        z = frobnicate(x)
        return z
    }
);

fn main() {}
