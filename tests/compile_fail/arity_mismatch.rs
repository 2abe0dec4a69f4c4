tgc::kernel!(bad:
    graph main(x: f32[4]) -> (z: f32[4]) {
        z = relu(x, x)
        return z
    }
);

fn main() {}
