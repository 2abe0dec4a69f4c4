tgc::kernel!(bad:
    graph main(x: f32[4]) -> (z: f32[4]) {
        z = relu(q)
        return z
    }
);

fn main() {}
