tgc::kernel!(bad:
    graph main(x: f32[4, 3]) -> (z: f32[3, 4]) {
        z = permute(x, [1, 1])
        return z
    }
);

fn main() {}
