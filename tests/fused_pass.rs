//! The fused pass against a scalar reference, bit for bit: over lengths around the lane width,
//! segmentations, thread counts and every option folded into the pass.

mod common;

use common::{bits, Rng};
use fusegraph::optim::{keras, Config, Ema, NormClip, Optimizer, Rule, Schedule, WeightDecay};
use fusegraph_runtime::math;
use fusegraph_runtime::optim::sum_squares;

/// Keras Adam and everything around it, one element at a time, in the order the fused pass
/// documents: gradient scale, clamp, L2, decoupled decay, rule, EMA.
struct Reference {
    rule: keras::Adam,
    config: Config,
    lens: Vec<usize>,
    m: Vec<f32>,
    v: Vec<f32>,
    ema: Vec<f32>,
    t: u64,
}

impl Reference {
    fn new(rule: keras::Adam, config: Config, lens: &[usize]) -> Self {
        let n = lens.iter().sum();
        Reference {
            rule,
            config,
            lens: lens.to_vec(),
            m: vec![0.0; n],
            v: vec![0.0; n],
            ema: vec![0.0; n],
            t: 0,
        }
    }

    fn step(&mut self, p: &mut [f32], g: &[f32]) {
        let done = self.t;
        self.t += 1;
        let tf = self.t as f32;
        let lr = self.config.schedule.map_or(self.rule.lr, |s| s.at(done));
        let (b1, b2) = (self.rule.beta_1, self.rule.beta_2);
        let alpha = lr * math::sqrt(1.0 - math::powf(b2, tf)) / (1.0 - math::powf(b1, tf));
        // Keras' `1 - beta` comes from Python floats: f64, rounded once.
        let c1 = (1.0 - math::decimal_f64(b1)) as f32;
        let c2 = (1.0 - math::decimal_f64(b2)) as f32;
        let global_norm = math::sqrt(self.ranges().map(|r| sum_squares(&g[r])).sum::<f64>()) as f32;
        let sign = if self.config.maximize { -1.0 } else { 1.0 };
        let clip = self.config.clip_value.unwrap_or(f32::INFINITY);
        for r in self.ranges().collect::<Vec<_>>() {
            let scale = sign
                * match self.config.clip_norm {
                    None => 1.0,
                    Some(NormClip::PerTensor(c)) => {
                        let norm = math::sqrt(sum_squares(&g[r.clone()]) as f32);
                        c / norm.max(c)
                    }
                    Some(NormClip::Global(c)) => c * (1.0 / global_norm).min(1.0 / c),
                    Some(NormClip::GlobalTorch(c)) => (c / (global_norm + 1e-6)).min(1.0),
                };
            let (l2, decay) = match self.config.weight_decay {
                WeightDecay::None => (0.0, 0.0),
                WeightDecay::L2(wd) => (wd, 0.0),
                WeightDecay::Decoupled(wd) => (0.0, wd * lr),
            };
            for i in r {
                let mut gi = g[i] * scale;
                gi = math::clamp(gi, -clip, clip);
                gi += l2 * p[i];
                p[i] -= p[i] * decay;
                self.m[i] += (gi - self.m[i]) * c1;
                self.v[i] += (gi * gi - self.v[i]) * c2;
                p[i] -= self.m[i] * alpha / (math::sqrt(self.v[i]) + self.rule.epsilon);
                if let Some(e) = self.config.ema {
                    let mom = if done == 0 { 0.0 } else { e.momentum };
                    self.ema[i] = mom * self.ema[i] + (1.0 - mom) * p[i];
                }
            }
        }
    }

    fn ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        self.lens.iter().scan(0, |start, &l| {
            let r = *start..*start + l;
            *start += l;
            Some(r)
        })
    }
}

fn configs() -> Vec<(&'static str, Config)> {
    vec![
        ("plain", Config::default()),
        (
            "clip value, global norm, L2",
            Config::default()
                .clip_value(0.3)
                .clip_norm(NormClip::Global(0.5))
                .weight_decay(WeightDecay::L2(0.01)),
        ),
        (
            "decoupled decay, EMA, maximize, schedule",
            Config::default()
                .weight_decay(WeightDecay::Decoupled(0.05))
                .ema(Ema {
                    momentum: 0.9,
                    overwrite_every: 0,
                })
                .maximize(true)
                .schedule(Schedule::exponential(0.02, 2, 0.5)),
        ),
        (
            "per-tensor norm",
            Config::default().clip_norm(NormClip::PerTensor(0.4)),
        ),
        (
            "torch global norm",
            Config::default().clip_norm(NormClip::GlobalTorch(0.4)),
        ),
    ]
}

fn layouts(n: usize) -> Vec<Vec<usize>> {
    let mut l = vec![vec![n]];
    if n >= 9 {
        l.push(vec![3, 5, 1, n - 9]);
    }
    if n >= 2 {
        l.push(vec![n / 2, n - n / 2]);
    }
    l
}

fn check(n: usize, lens: &[usize], name: &str, config: Config, seed: u64) {
    let mut rng = Rng::new(seed);
    let rule = keras::Adam::default().with_lr(0.01);
    let mut opt = Optimizer::with_config(rule, lens, config);
    let mut reference = Reference::new(rule, config, lens);
    let mut p = rng.vec(n, 2.0);
    let mut q = p.clone();
    for step in 0..4 {
        let g = rng.vec(n, 1.5);
        opt.step(&mut p, &g);
        reference.step(&mut q, &g);
        assert_eq!(
            bits(&p),
            bits(&q),
            "{name}, n={n}, lens={lens:?}, step {step}: params"
        );
        assert_eq!(
            bits(opt.slot("momentum").unwrap()),
            bits(&reference.m),
            "{name}: m"
        );
        assert_eq!(
            bits(opt.slot("velocity").unwrap()),
            bits(&reference.v),
            "{name}: v"
        );
        if config.ema.is_some() {
            assert_eq!(
                bits(opt.ema().unwrap()),
                bits(&reference.ema),
                "{name}: ema"
            );
        }
    }
}

#[test]
fn fused_pass_equals_scalar_reference_over_lengths_layouts_and_options() {
    let lanes = fusegraph_runtime::LANES;
    for n in (0..=2 * lanes + 1).chain([63, 64, 65, 1000]) {
        for lens in layouts(n) {
            for (i, (name, config)) in configs().into_iter().enumerate() {
                check(n, &lens, name, config, 31 * n as u64 + i as u64);
            }
        }
    }
}

#[test]
fn layout_does_not_change_element_wise_results() {
    let n = 1001;
    let mut rng = Rng::new(5);
    let p0 = rng.vec(n, 1.0);
    let gs: Vec<Vec<f32>> = (0..3).map(|_| rng.vec(n, 1.0)).collect();
    let run = |lens: &[usize]| {
        let mut opt = Optimizer::new(keras::Nadam::default(), lens);
        let mut p = p0.clone();
        for g in &gs {
            opt.step(&mut p, g);
        }
        bits(&p)
    };
    let whole = run(&[n]);
    assert_eq!(whole, run(&[1, 7, 8, 9, 976]));
    assert_eq!(whole, run(&[500, 501]));
}

#[test]
fn one_and_two_threads_give_the_same_bits_above_the_parallel_threshold() {
    let n = 2 * fusegraph::optim::PARALLEL_THRESHOLD + 13;
    let mut rng = Rng::new(11);
    let p0 = rng.vec(n, 1.0);
    let g = rng.vec(n, 1.0);
    let config = Config::default().clip_norm(NormClip::Global(100.0));
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut opt = Optimizer::with_config(keras::Adam::default(), &[n - 5, 5], config);
            let mut p = p0.clone();
            opt.step(&mut p, &g);
            opt.step(&mut p, &g);
            p
        })
    };
    let one = run(1);
    let two = run(2);
    assert_eq!(bits(&one), bits(&two));
    let mut reference = Reference::new(keras::Adam::default(), config, &[n - 5, 5]);
    let mut q = p0.clone();
    reference.step(&mut q, &g);
    reference.step(&mut q, &g);
    assert_eq!(
        bits(&one),
        bits(&q),
        "parallel pass differs from the scalar reference"
    );
}

#[test]
fn state_round_trips_through_get_and_set_weights() {
    let lens = [10, 6];
    let mut rng = Rng::new(3);
    let config = Config::default().ema(Ema {
        momentum: 0.5,
        overwrite_every: 4,
    });
    let grads: Vec<Vec<f32>> = (0..8).map(|_| rng.vec(16, 1.0)).collect();
    let mut straight = Optimizer::with_config(keras::Nadam::default(), &lens, config);
    let mut p = rng.vec(16, 1.0);
    let mut q = p.clone();
    for g in &grads {
        straight.step(&mut p, g);
    }
    let mut first = Optimizer::with_config(keras::Nadam::default(), &lens, config);
    for g in &grads[..3] {
        first.step(&mut q, g);
    }
    let saved = first.get_weights();
    assert_eq!(saved.len(), first.weight_names().len());
    let mut resumed = Optimizer::with_config(keras::Nadam::default(), &lens, config);
    resumed.set_weights(&saved).unwrap();
    assert_eq!(resumed.carried("u_product"), first.carried("u_product"));
    for g in &grads[3..] {
        resumed.step(&mut q, g);
    }
    assert_eq!(bits(&p), bits(&q));
    assert_eq!(resumed.iterations(), 8);

    let mut bad = saved.clone();
    bad[3].push(0.0);
    let before = resumed.get_weights();
    assert!(resumed.set_weights(&bad).is_err());
    assert!(resumed.set_weights(&saved[1..]).is_err());
    assert_eq!(
        resumed.get_weights(),
        before,
        "a rejected state must change nothing"
    );
}

#[test]
fn per_tensor_overrides_apply_to_their_tensor_only() {
    let mut opt = Optimizer::with_config(
        keras::Sgd::default().with_lr(0.5),
        &[4, 4],
        Config::default().weight_decay(WeightDecay::Decoupled(0.1)),
    );
    opt.set_tensor_rule(1, keras::Sgd::default().with_lr(0.0))
        .unwrap();
    opt.set_tensor_weight_decay(0, 0.0).unwrap();
    assert!(opt.set_tensor_rule(2, keras::Sgd::default()).is_err());
    let mut p = vec![1.0; 8];
    opt.step(&mut p, &[1.0; 8]);
    assert_eq!(&p[..4], &[0.5; 4], "no decay on tensor 0, lr 0.5");
    assert_eq!(
        &p[4..],
        &[1.0; 4],
        "lr 0 on tensor 1: decay is lr-scaled, so nothing moves"
    );
    assert_eq!(keras::Sgd::HYPER, &["lr"]);
}

fusegraph::optimizer! {
    /// Plain SGD whose learning rate is named `eta`: no schedule can set it.
    pub struct EtaSgd {
        hyper { eta: f32 = 0.1 }
        update { p -= eta * g; }
    }
}

#[test]
fn the_learning_rate_is_the_field_of_lr() {
    use fusegraph::optim::LearningRate;
    let mut sgd = keras::Sgd::default().with_lr(0.25);
    assert_eq!((sgd.lr(), sgd.learning_rate()), (0.25, Some(0.25)));
    sgd.set_lr(0.5);
    assert_eq!(sgd.lr, 0.5);
    *sgd.learning_rate_mut().unwrap() = 0.75;
    assert_eq!(sgd.hyper("lr"), Some(0.75));
    let mut eta = EtaSgd::default();
    assert_eq!((eta.learning_rate(), eta.learning_rate_mut()), (None, None));
}

#[test]
#[should_panic(
    expected = "a learning-rate schedule sets the hyper-parameter `lr`, and `EtaSgd` has none"
)]
fn a_schedule_for_a_rule_without_a_learning_rate_is_refused() {
    let config = Config::default().schedule(Schedule::constant(0.5));
    let _ = Optimizer::with_config(EtaSgd::default(), &[1], config);
}
