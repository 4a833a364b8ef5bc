//! A train step allocates nothing: a counting global allocator sees no allocation during
//! optimizer steps, whatever options are folded into the pass, serial or across rayon.

use fusegraph::optim::{
    keras, torch, Config, Ema, NormClip, Optimizer, Rule, Schedule, WeightDecay,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during_steps<R: Rule>(rule: R, lens: &[usize], config: Config) -> usize {
    let n: usize = lens.iter().sum();
    let mut opt = Optimizer::with_config(rule, lens, config);
    opt.set_tensor_weight_decay(0, 0.0).unwrap();
    let mut p = vec![0.5_f32; n];
    let g: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    opt.step(&mut p, &g);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..5 {
        opt.step(&mut p, &g);
    }
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

#[test]
fn optimizer_steps_do_not_allocate() {
    let full = Config::default()
        .clip_value(1.0)
        .clip_norm(NormClip::Global(2.0))
        .weight_decay(WeightDecay::Decoupled(0.01))
        .ema(Ema {
            momentum: 0.99,
            overwrite_every: 3,
        })
        .schedule(Schedule::cosine(0.01, 100, 0.0).with_warmup(2, 0.0));
    let cases: Vec<(&str, usize)> = vec![
        (
            "keras adam",
            allocations_during_steps(keras::Adam::default(), &[100, 7], Config::default()),
        ),
        (
            "keras adam, all options",
            allocations_during_steps(keras::Adam::default(), &[100, 7], full),
        ),
        (
            "keras nadam",
            allocations_during_steps(keras::Nadam::default(), &[33], full),
        ),
        (
            "torch sgd, per-tensor norm, L2",
            allocations_during_steps(
                torch::SgdMomentum::default(),
                &[10, 20, 30],
                Config::default()
                    .clip_norm(NormClip::PerTensor(1.0))
                    .weight_decay(WeightDecay::L2(0.1)),
            ),
        ),
        (
            "parallel adam",
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap()
                .install(|| {
                    allocations_during_steps(
                        keras::Adam::default(),
                        &[3 << 20, 5],
                        Config::default().clip_norm(NormClip::Global(1.0)),
                    )
                }),
        ),
    ];
    for (name, count) in &cases {
        assert_eq!(*count, 0, "{name}: {count} allocations in 5 steps");
    }
}
