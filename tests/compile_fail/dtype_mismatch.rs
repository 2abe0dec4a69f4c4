tgc::kernel!(bad:
    graph main(x: f32[4], y: f16[4]) -> (z: f32[4]) {
        z = x * y
        return z
    }
);

fn main() {}
