tgc::kernel!(scale:
    graph<N> main(x: f32[N]) -> (y: f32[N]) {
        y = x * 2.0
        return y
    },
    shapes(M = 4)
);

fn main() {}
