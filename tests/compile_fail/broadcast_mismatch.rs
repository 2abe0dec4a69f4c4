tgc::kernel!(bad:
    graph main(x: f32[4, 3], y: f32[4, 5]) -> (z: f32[4, 3]) {
        z = x + y
        return z
    }
);

fn main() {}
