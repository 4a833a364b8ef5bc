use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, input = u32, graph(e = tok(x) * x, y = fc(e)))]
struct Net {
    tok: Embedding<10, 1, 3>,
    fc: Dense<3, 1>,
}

fn main() {}
