tgc::kernel!(bad:
    graph main(x: f32[4, 3]) -> (z: f32[5, 2]) {
        z = reshape(x, [5, 2])
        return z
    }
);

fn main() {}
