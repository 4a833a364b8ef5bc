use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(
    h = gru(x),
    c = concat(h, x),
    y = head(c)
))]
struct Net {
    gru: Gru<4, 2, 6>,
    head: Dense<12, 3>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
