//! A rule's views ([`Rule::VIEWS`]): other values of the parameters, computed element by
//! element from them and their slots on the lanes [`lane::dispatch_for`] picks, tails padded
//! into a lane and run by the same lane code.

use super::rule::{Rule, MAX_SLOTS};
use super::tensorwise::lanes;
use crate::lane::{self, Lane, OnLanes};

/// Writes view `view` of one tensor's parameters `params` into `out`; `slots` are the
/// tensor's element slots in slot order (an empty one reads as the parameters).
pub(crate) fn write<R: Rule>(
    rule: &R,
    view: usize,
    params: &[f32],
    slots: [&[f32]; MAX_SLOTS],
    out: &mut [f32],
) {
    lane::dispatch_for(
        params.len(),
        ViewOnLanes {
            rule,
            view,
            params,
            slots,
            out,
        },
    );
}

/// [`write`] on lanes of one type.
struct ViewOnLanes<'a, R> {
    rule: &'a R,
    view: usize,
    params: &'a [f32],
    slots: [&'a [f32]; MAX_SLOTS],
    out: &'a mut [f32],
}

impl<R: Rule> OnLanes for ViewOnLanes<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let n = R::SLOTS.len();
        for at in lanes::<L>(self.params.len()) {
            let p: L = at.load(self.params);
            let slots: [L; MAX_SLOTS] = core::array::from_fn(|j| match self.slots[j] {
                s if j < n && !s.is_empty() => at.load(s),
                _ => p,
            });
            let v = self.rule.view(self.view, p, &slots[..n]);
            at.store(v, self.out);
        }
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use crate::lane::{run_on, Capability};
    use crate::optim::{optax::ScheduleFreeAdamw, Optimizer, Shape};
    use alloc::vec;
    use alloc::vec::Vec;

    /// Parameters and gradients of two tensors, 19 and 3 x 5 values: tails in every lane type.
    fn data(step: usize) -> (Vec<f32>, Vec<f32>) {
        let p = (0..34).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
        let g = (0..34)
            .map(|i| ((i * (step + 3)) as f32 * 0.91).cos())
            .collect();
        (p, g)
    }

    fn schedule_free() -> Optimizer<ScheduleFreeAdamw> {
        let rule = ScheduleFreeAdamw::default()
            .with_lr(0.05)
            .with_warmup_steps(2.0);
        let shapes = [Shape::vector(19), Shape::matrix(3, 5)];
        Optimizer::with_shapes(rule, &shapes, Default::default())
    }

    /// A slot that starts as the parameters reads as them after `start_from`, and the first
    /// step copies them in without it: the same bits either way.
    #[test]
    fn slots_start_as_the_parameters_at_the_first_step() {
        let (params, _) = data(0);
        let mut started = schedule_free();
        started.start_from(&params);
        assert_eq!(started.slot("z").unwrap(), &params[..]);
        let mut lazy = schedule_free();
        assert!(lazy.slot("z").unwrap().iter().all(|z| *z == 0.0));
        let (mut a, mut b) = (params.clone(), params.clone());
        for step in 0..3 {
            let (_, g) = data(step);
            started.step(&mut a, &g);
            lazy.step(&mut b, &g);
        }
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
        for slot in ["z", "nu"] {
            assert_eq!(
                bits(started.slot(slot).unwrap()),
                bits(lazy.slot(slot).unwrap())
            );
        }
        assert_ne!(bits(started.slot("z").unwrap()), bits(&params), "z moved");
    }

    /// `eval_params = (p - (1 - b1) * z) / b1`, element by element as written, on every lane
    /// type.
    #[test]
    fn a_view_is_its_expression_on_every_lane_type() {
        let mut opt = schedule_free();
        let (mut params, _) = data(0);
        for step in 0..4 {
            let (_, g) = data(step);
            opt.step(&mut params, &g);
        }
        let b1 = opt.rule().b1;
        let z = opt.slot("z").unwrap();
        let want: Vec<u32> = params
            .iter()
            .zip(z)
            .map(|(p, z)| ((p - (1.0 - b1) * z) / b1).to_bits())
            .collect();
        let mut out = vec![f32::NAN; params.len()];
        opt.view(0, &params, &mut out);
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
        let mut slots: [&[f32]; MAX_SLOTS] = Default::default();
        slots[0] = &z[..19];
        let on = |c: Capability| {
            let mut out = [0.0f32; 19];
            run_on(
                c,
                ViewOnLanes {
                    rule: opt.rule(),
                    view: 0,
                    params: &params[..19],
                    slots,
                    out: &mut out,
                },
            );
            out.map(f32::to_bits)
        };
        for c in Capability::ALL {
            assert_eq!(on(c)[..], want[..19], "{c:?}");
        }
    }
}
