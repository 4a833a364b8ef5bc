use fusegraph::prelude::*;

fusegraph::activation! {
    /// `powi` of a constant: it may be fractional, so write `powf`.
    pub Pow { k: f32 = 2.0 } (x) = x.powi(k);
    /// A literal exponent too large to multiply out.
    pub Big(x) = x.powi(-100000);
}

fn main() {
    let _ = <Pow as Activation>::NAME;
    let _ = <Big as Activation>::NAME;
}
