//! Tensor-wise rules: the passes a rule with reductions, row and column statistics or matrix
//! steps makes over each tensor, and their code.
//!
//! Every statement gets a *level*: the number of reductions or matrix steps its value waits
//! for (a reduction's result is one level above its argument; a slot or `p` read has the level
//! of the statement that last assigned it). Pass `k` runs the statements of level `k`, in
//! program order: first those with one value per tensor (between passes), then those with one
//! per column (a loop over the columns), then those with one per row (at the start of each
//! row) and one per element (the lanes of the row, or of the whole tensor when the pass reads
//! no row or column value). A reduction adds its argument up in the pass of the argument's
//! level; a matrix step stores its argument there and runs after that pass. A `let` that a
//! later pass reads is computed again there from what it reads, which the check of [`hazards`]
//! makes sure has not changed since.
//!
//! The lanes of a pass run over whole lanes while they fit, then over the partial one, on views
//! of the buffers cut to the span they walk (the tensor, or the row), so that the loop's
//! condition bounds their loads and stores. What a lane expression computes of one value per row
//! or fewer is computed once, at the start of the row or before the lanes ([`Emitter::hoist`]),
//! and a slot the lanes assign before they read it is not loaded.

use super::check::{update_value, CheckedBranch, Rule, UpdateStmt};
use crate::errors::{self, Errors};
use crate::expr::ast::{CmpOp, Func, TensorStep};
use crate::expr::emit;
use crate::expr::ir::{Dim, Kind, Node, Ref, TExpr};
use crate::paths;
use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote};
use std::cell::RefCell;

/// A reduction of a branch's plan: `func` over `arg`, which pass `level` adds up.
struct Reduction {
    func: Func,
    arg: TExpr,
    level: usize,
}

/// A matrix step of a branch's plan: its argument, stored by pass `level`, and its per-step
/// iterations and coefficients.
struct Matrix {
    arg: TExpr,
    level: usize,
    scalars: [TExpr; 4],
}

/// One statement of a branch with the pass it runs in.
struct Planned {
    stmt: UpdateStmt,
    level: usize,
    kind: Kind,
    span: Span,
    /// The reductions and matrix steps whose arguments this statement holds.
    reductions: Vec<usize>,
    matrices: Vec<usize>,
}

/// What a value reads or writes: `p` or a slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    P,
    Slot(usize),
}

/// A branch planned into passes.
struct Plan {
    stmts: Vec<Planned>,
    reductions: Vec<Reduction>,
    matrices: Vec<Matrix>,
    /// Each `let`'s statement index.
    lets: Vec<usize>,
    passes: usize,
}

impl Plan {
    fn new(branch: &CheckedBranch, slots: usize) -> Plan {
        let mut plan = Plan {
            stmts: Vec::new(),
            reductions: Vec::new(),
            matrices: Vec::new(),
            lets: Vec::new(),
            passes: 1,
        };
        let mut slot_levels = vec![0; slots];
        let mut p_level = 0;
        let mut let_levels: Vec<usize> = Vec::new();
        for (stmt, span) in branch.stmts.iter().zip(&branch.spans) {
            let (red0, mat0) = (plan.reductions.len(), plan.matrices.len());
            let levels = Levels {
                slots: &slot_levels,
                p: p_level,
                lets: &let_levels,
            };
            let (value, level) = plan.extract(update_value(stmt), &levels);
            let (stmt, level) = match stmt {
                UpdateStmt::Let(i, _) => {
                    let_levels.push(level);
                    plan.lets.push(plan.stmts.len());
                    (UpdateStmt::Let(*i, value.clone()), level)
                }
                UpdateStmt::SetP(_) => {
                    p_level = p_level.max(level);
                    (UpdateStmt::SetP(value.clone()), p_level)
                }
                UpdateStmt::SetSlot(j, _) => {
                    slot_levels[*j] = slot_levels[*j].max(level);
                    (UpdateStmt::SetSlot(*j, value.clone()), slot_levels[*j])
                }
            };
            plan.passes = plan.passes.max(level + 1);
            plan.stmts.push(Planned {
                stmt,
                level,
                kind: value.kind,
                span: *span,
                reductions: (red0..plan.reductions.len()).collect(),
                matrices: (mat0..plan.matrices.len()).collect(),
            });
        }
        plan
    }

    /// `e` with each reduction and matrix step replaced by its result, and its level.
    fn extract(&mut self, e: &TExpr, levels: &Levels<'_>) -> (TExpr, usize) {
        match &e.node {
            Node::Call(f, args) if f.is_tensor_step() => {
                let (arg, level) = self.extract(&args[0], levels);
                if *f == Func::Tensor(TensorStep::Orthogonalize) {
                    let scalars = [0, 1, 2, 3].map(|i| args[i + 1].clone());
                    self.matrices.push(Matrix {
                        arg,
                        level,
                        scalars,
                    });
                    let r = Ref::Matrix(self.matrices.len() - 1);
                    return (TExpr::new(Node::Ref(r), Kind::Lane), level + 1);
                }
                self.reductions.push(Reduction {
                    func: *f,
                    arg,
                    level,
                });
                let r = Ref::Reduced(self.reductions.len() - 1);
                (TExpr::new(Node::Ref(r), e.kind), level + 1)
            }
            Node::Ref(r) => (e.clone(), levels.of(*r)),
            _ => {
                let mut level = 0;
                let e = map_children(e, &mut |c| {
                    let (c, l) = self.extract(c, levels);
                    level = level.max(l);
                    c
                });
                (e, level)
            }
        }
    }
}

/// The levels of what a statement reads, at its place in the branch.
struct Levels<'a> {
    slots: &'a [usize],
    p: usize,
    lets: &'a [usize],
}

impl Levels<'_> {
    fn of(&self, r: Ref) -> usize {
        match r {
            Ref::P => self.p,
            Ref::Slot(j) => self.slots[j],
            Ref::Let(i) => self.lets[i],
            _ => 0,
        }
    }
}

/// `e` with `f` applied to each direct sub-expression.
fn map_children(e: &TExpr, f: &mut dyn FnMut(&TExpr) -> TExpr) -> TExpr {
    let mut b = |x: &TExpr| Box::new(f(x));
    let node = match &e.node {
        Node::Neg(x) => Node::Neg(b(x)),
        Node::Bin(op, x, y) => Node::Bin(*op, b(x), b(y)),
        Node::Cmp(op, x, y) => Node::Cmp(*op, b(x), b(y)),
        Node::Call(func, args) => Node::Call(*func, args.iter().map(|a| *b(a)).collect()),
        Node::PowiLit(x, k) => Node::PowiLit(b(x), *k),
        Node::If(c, x, y) => Node::If(b(c), b(x), b(y)),
        other => other.clone(),
    };
    TExpr::new(node, e.kind)
}

/// Calls `f` on every name `e` reads.
fn refs(e: &TExpr, f: &mut dyn FnMut(Ref)) {
    if let Node::Ref(r) = e.node {
        f(r);
    }
    for c in e.children() {
        refs(c, f);
    }
}

/// Whether `e` has a value of one per row or per column anywhere.
fn reads_rows_or_cols(e: &TExpr) -> bool {
    matches!(e.kind, Kind::Row | Kind::Col) || e.children().into_iter().any(reads_rows_or_cols)
}

/// The order in which a pass runs the statements of each kind.
fn section(kind: Kind) -> u8 {
    match kind {
        Kind::Scalar | Kind::Tensor => 0,
        Kind::Col => 1,
        Kind::Row => 2,
        Kind::Lane => 3,
    }
}

/// Reports each assignment that a statement before it, run in a later pass (or in a later
/// section of the same pass), would see: a read of `p` or a slot by a statement, by a
/// reduction's argument, or by a `let` computed again in a later pass, must see the value the
/// program order gives it.
fn hazards(plan: &Plan, slot_names: &[String], errs: &mut Errors) {
    let assigned: Vec<Option<Target>> = plan
        .stmts
        .iter()
        .map(|s| match s.stmt {
            UpdateStmt::SetP(_) => Some(Target::P),
            UpdateStmt::SetSlot(j, _) => Some(Target::Slot(j)),
            UpdateStmt::Let(..) => None,
        })
        .collect();
    let mut reported = vec![false; plan.stmts.len()];
    let mut check = |target: Target, at: usize, level: usize, reader: Kind| {
        for (q, s) in plan.stmts.iter().enumerate().skip(at + 1) {
            let earlier =
                s.level < level || (s.level == level && section(s.kind) < section(reader));
            if assigned[q] == Some(target) && earlier && !reported[q] {
                reported[q] = true;
                let name = match target {
                    Target::P => "p".to_string(),
                    Target::Slot(j) => slot_names[j].clone(),
                };
                errs.at(s.span, errors::read_after_later_assignment(&name));
            }
        }
    };
    for (i, s) in plan.stmts.iter().enumerate() {
        let value = update_value(&s.stmt);
        reads_at(plan, value, i, s.level, s.kind, &mut check);
        for &k in &s.reductions {
            let r = &plan.reductions[k];
            reads_at(plan, &r.arg, i, r.level, r.arg.kind, &mut check);
        }
        for &m in &s.matrices {
            let x = &plan.matrices[m];
            reads_at(plan, &x.arg, i, x.level, Kind::Lane, &mut check);
        }
    }
}

/// Calls `check(target, place, level, reader)` for each read of `p` or a slot by `e`, read at
/// statement `at` in pass `level` by a statement of kind `reader`; a `let` it reads is
/// followed to its own place.
fn reads_at(
    plan: &Plan,
    e: &TExpr,
    at: usize,
    level: usize,
    reader: Kind,
    check: &mut dyn FnMut(Target, usize, usize, Kind),
) {
    refs(e, &mut |r| match r {
        Ref::P => check(Target::P, at, level, reader),
        Ref::Slot(j) => check(Target::Slot(j), at, level, reader),
        Ref::Let(i) => {
            let place = plan.lets[i];
            if plan.stmts[place].level < level {
                let value = update_value(&plan.stmts[place].stmt);
                reads_at(plan, value, place, level, reader, check);
            }
        }
        _ => {}
    });
}

/// What the code of one place of a pass reads and assigns of `p`, `g` and its local slots.
struct Uses {
    /// The local slots it reads or assigns, in order.
    slots: Vec<usize>,
    /// The local slots it assigns.
    written: Vec<usize>,
    /// The local slots it reads before it assigns them.
    loaded: Vec<usize>,
    p: bool,
    p_written: bool,
    g: bool,
}

/// Where code runs, which decides how it names what it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Between passes, once per tensor.
    Tensor,
    /// The loop over the columns.
    Cols,
    /// The start of a row.
    Row,
    /// The lanes of a row, or of the whole tensor.
    Lanes,
}

/// The kinds of value each place computes.
fn runs_at(kind: Kind, place: Place) -> bool {
    match place {
        Place::Tensor => matches!(kind, Kind::Scalar | Kind::Tensor),
        Place::Cols => kind == Kind::Col,
        Place::Row => kind == Kind::Row,
        Place::Lanes => kind == Kind::Lane,
    }
}

/// The kinds of `let` each place computes: a column value read by lanes is computed there
/// again, from the columns the lane is at.
fn let_runs_at(kind: Kind, place: Place) -> bool {
    match place {
        Place::Lanes => matches!(kind, Kind::Lane | Kind::Col),
        _ => runs_at(kind, place),
    }
}

/// The places whose values `place` computes for: a row's start computes what the lanes of the
/// row read.
fn consumers(place: Place) -> &'static [Place] {
    match place {
        Place::Row => &[Place::Row, Place::Lanes],
        Place::Tensor => &[Place::Tensor],
        Place::Cols => &[Place::Cols],
        Place::Lanes => &[Place::Lanes],
    }
}

/// The code of one branch's plan.
struct Emitter<'a> {
    plan: &'a Plan,
    lifted: &'a [TExpr],
    slot_kinds: &'a [Kind],
    /// The values of one per row or fewer that the lanes of the pass being emitted read,
    /// computed once before its lanes (see [`Emitter::hoist`]).
    hoisted: RefCell<Vec<TExpr>>,
}

impl Emitter<'_> {
    /// Lane code for `e` at `place`; in the lanes, what it computes of one value per row or
    /// fewer is read from the values hoisted out of them.
    fn code(&self, e: &TExpr, place: Place) -> TokenStream {
        let e = if place == Place::Lanes {
            self.hoist(e)
        } else {
            e.clone()
        };
        self.code_as_is(&e, place)
    }

    /// Lane code for `e` at `place`, every part of it computed where it stands.
    fn code_as_is(&self, e: &TExpr, place: Place) -> TokenStream {
        let refs = |r: Ref| self.reference(r, place);
        emit::lane(e, &quote!(__L), &refs, self.lifted, &quote!(__s))
    }

    /// `e` with each largest part that computes one value per row or fewer (`r / mean(r)`,
    /// `ratio * lr`) replaced by a reference to it among [`hoisted`](Emitter::hoisted)
    /// (`Ref::Var`, which optimizer rules do not otherwise name): the lanes then read a value
    /// computed once per row or per tensor, with the same operations and so the same bits.
    fn hoist(&self, e: &TExpr) -> TExpr {
        if hoistable(e) {
            let mut hoisted = self.hoisted.borrow_mut();
            let i = hoisted.iter().position(|h| h == e).unwrap_or_else(|| {
                hoisted.push(e.clone());
                hoisted.len() - 1
            });
            return TExpr::new(Node::Ref(Ref::Var(i)), e.kind);
        }
        map_children(e, &mut |c| self.hoist(c))
    }

    /// The `let`s of the values [`hoist`](Self::hoist) took out of the lanes of a pass, taken
    /// from [`hoisted`](Emitter::hoisted): those of one value per row, computed at the start
    /// of each row, and the others, computed before the lanes.
    fn hoisted_lets(&self) -> (TokenStream, TokenStream) {
        let (mut per_row, mut per_tensor) = (TokenStream::new(), TokenStream::new());
        for (i, e) in self.hoisted.take().iter().enumerate() {
            let h = format_ident!("__h{}", i);
            let v = self.code_as_is(e, Place::Lanes);
            let hoisted = quote!(let #h: f32 = __rt::first(#v););
            match e.kind {
                Kind::Row => per_row.extend(hoisted),
                _ => per_tensor.extend(hoisted),
            }
        }
        (per_row, per_tensor)
    }

    /// A value kept as one `f32`, as lanes.
    fn splat(x: TokenStream) -> TokenStream {
        quote!(__L::splat(#x))
    }

    /// What `r` is called at `place`.
    fn reference(&self, r: Ref, place: Place) -> TokenStream {
        match r {
            Ref::P => quote!(__pv),
            Ref::G => quote!(__gv),
            Ref::Slot(j) => {
                let b = format_ident!("__b{}", j);
                let v = format_ident!("__sv{}", j);
                match (self.slot_kinds[j], place) {
                    (Kind::Row, _) => Self::splat(quote!(#b[__r])),
                    (Kind::Col, Place::Lanes) => quote!(__at.load::<__L>(&*#b)),
                    _ => quote!(#v),
                }
            }
            Ref::Let(i) => {
                let l = format_ident!("__l{}", i);
                let kind = self.plan.stmts[self.plan.lets[i]].kind;
                match kind {
                    Kind::Lane | Kind::Col => quote!(#l),
                    _ => Self::splat(quote!(#l)),
                }
            }
            Ref::Reduced(k) => {
                let red = format_ident!("__red{}", k);
                match reduced_kind(self.plan.reductions[k].func) {
                    Kind::Row => Self::splat(quote!(#red[__r])),
                    Kind::Col => quote!(__at.load::<__L>(&*#red)),
                    _ => Self::splat(quote!(#red)),
                }
            }
            Ref::Matrix(m) => {
                let mat = format_ident!("__mat{}", m);
                quote!(__e.load::<__L>(&*#mat))
            }
            Ref::Dim(d) => {
                let dim = dim_ident(d);
                Self::splat(quote!(#dim))
            }
            Ref::Var(i) => {
                let h = format_ident!("__h{}", i);
                Self::splat(quote!(#h))
            }
            _ => unreachable!("update code reads scalars lifted into the step"),
        }
    }

    /// The `let`s computed at `place` that `roots` read in pass `level`, directly or through
    /// other `let`s, each once, by index.
    fn needed_lets(&self, roots: &[&TExpr], place: Place) -> Vec<usize> {
        let mut visited = vec![false; self.plan.lets.len()];
        let mut stack: Vec<&TExpr> = roots.to_vec();
        while let Some(e) = stack.pop() {
            refs(e, &mut |r| {
                if let Ref::Let(i) = r {
                    if !visited[i] {
                        visited[i] = true;
                        stack.push(update_value(&self.plan.stmts[self.plan.lets[i]].stmt));
                    }
                }
            });
        }
        (0..visited.len())
            .filter(|&i| visited[i] && let_runs_at(self.plan.stmts[self.plan.lets[i]].kind, place))
            .collect()
    }

    /// What the items at `place` of pass `level` compute: its assignments, and the arguments
    /// of the reductions and matrix steps it adds up or stores.
    fn roots(&self, level: usize, place: Place) -> Vec<&TExpr> {
        let plan = self.plan;
        let mut roots: Vec<&TExpr> = Vec::new();
        for s in &plan.stmts {
            if s.level == level && runs_at(s.kind, place) && !matches!(s.stmt, UpdateStmt::Let(..))
            {
                roots.push(update_value(&s.stmt));
            }
            for &k in &s.reductions {
                let r = &plan.reductions[k];
                if r.level == level && runs_at(r.arg.kind, place) {
                    roots.push(&r.arg);
                }
            }
            for &m in &s.matrices {
                if plan.matrices[m].level == level && runs_at(Kind::Lane, place) {
                    roots.push(&plan.matrices[m].arg);
                }
            }
        }
        roots
    }

    /// The code of the items at `place` of pass `level`, in program order: the `let`s they
    /// need, the assignments of that level, the reductions that add up arguments of that level
    /// and the matrix steps that store them. `lane_slots` are loaded into locals.
    fn items(&self, level: usize, place: Place) -> TokenStream {
        let plan = self.plan;
        let needed = self.lets_at(level, place);
        let mut out = TokenStream::new();
        for s in &plan.stmts {
            for &k in &s.reductions {
                let r = &plan.reductions[k];
                if r.level == level && runs_at(r.arg.kind, place) {
                    out.extend(self.reduce(k, place));
                }
            }
            for &m in &s.matrices {
                let x = &plan.matrices[m];
                if x.level == level && runs_at(Kind::Lane, place) {
                    let v = self.code(&x.arg, place);
                    let mat = format_ident!("__mat{}", m);
                    out.extend(quote!(__e.store(#v, &mut *#mat);));
                }
            }
            match &s.stmt {
                UpdateStmt::Let(i, e) if needed.contains(i) => {
                    let l = format_ident!("__l{}", i);
                    let v = self.code(e, place);
                    out.extend(match s.kind {
                        Kind::Lane | Kind::Col => quote!(let #l: __L = #v;),
                        _ => quote!(let #l: f32 = __rt::first(#v);),
                    });
                }
                UpdateStmt::SetP(e) if s.level == level && runs_at(s.kind, place) => {
                    let v = self.code(e, place);
                    out.extend(quote!(__pv = #v;));
                }
                UpdateStmt::SetSlot(j, e) if s.level == level && runs_at(s.kind, place) => {
                    let v = self.code(e, place);
                    let b = format_ident!("__b{}", j);
                    let sv = format_ident!("__sv{}", j);
                    out.extend(match self.slot_kinds[*j] {
                        Kind::Row => quote!(#b[__r] = __rt::first(#v);),
                        _ => quote!(#sv = #v;),
                    });
                }
                _ => {}
            }
        }
        out
    }

    /// The `let`s that [`items`](Self::items) computes at `place` of pass `level`.
    fn lets_at(&self, level: usize, place: Place) -> Vec<usize> {
        let plan = self.plan;
        if place == Place::Tensor {
            return (0..plan.lets.len())
                .filter(|&i| {
                    let s = &plan.stmts[plan.lets[i]];
                    s.level == level && runs_at(s.kind, place)
                })
                .collect();
        }
        let roots: Vec<&TExpr> = consumers(place)
            .iter()
            .flat_map(|&c| self.roots(level, c))
            .collect();
        self.needed_lets(&roots, place)
    }

    /// The slots `local` keeps that the items at `place` of pass `level` read before they
    /// assign them, in the order [`items`](Self::items) emits them: the ones to load (a slot
    /// the pass only assigns, or reads after assigning, is not read from memory).
    fn read_first(&self, level: usize, place: Place, local: &dyn Fn(usize) -> bool) -> Vec<usize> {
        let plan = self.plan;
        let needed = self.lets_at(level, place);
        let mut assigned = vec![false; self.slot_kinds.len()];
        let mut first = Vec::new();
        let mut read = |e: &TExpr, assigned: &[bool]| {
            refs(e, &mut |r| match r {
                Ref::Slot(j) if local(j) && !assigned[j] => first.push(j),
                _ => {}
            })
        };
        for s in &plan.stmts {
            for &k in &s.reductions {
                let r = &plan.reductions[k];
                if r.level == level && runs_at(r.arg.kind, place) {
                    read(&r.arg, &assigned);
                }
            }
            for &m in &s.matrices {
                let x = &plan.matrices[m];
                if x.level == level && runs_at(Kind::Lane, place) {
                    read(&x.arg, &assigned);
                }
            }
            let here = s.level == level && runs_at(s.kind, place);
            match &s.stmt {
                UpdateStmt::Let(i, e) if needed.contains(i) => read(e, &assigned),
                UpdateStmt::SetP(e) if here => read(e, &assigned),
                UpdateStmt::SetSlot(j, e) if here => {
                    read(e, &assigned);
                    assigned[*j] = true;
                }
                _ => {}
            }
        }
        first.sort_unstable();
        first.dedup();
        first
    }

    /// Adds reduction `k`'s argument at `place`.
    fn reduce(&self, k: usize, place: Place) -> TokenStream {
        let r = &self.plan.reductions[k];
        let v = self.code(&r.arg, place);
        // A norm and a root mean square add up squares.
        let v = match r.func {
            Func::Tensor(TensorStep::Norm) | Func::Tensor(TensorStep::Rms) => {
                quote!({ let __x: __L = #v; __x * __x })
            }
            _ => v,
        };
        let sum = format_ident!("__sum{}", k);
        let red = format_ident!("__red{}", k);
        match (reduced_kind(r.func), place) {
            (Kind::Col, _) => quote! {{
                let __c: __L = __at.load::<__L>(&*#red);
                __at.store(__c + #v, &mut *#red);
            }},
            (Kind::Tensor, Place::Row) => quote!(#sum.add_value(__rt::first(#v));),
            (_, Place::Cols) => quote!(#sum.add(__at, #v);),
            _ => quote!(#sum.add(__e, #v);),
        }
    }

    /// Whether pass `level` runs row by row: it has row statements, reads a row or column
    /// value in its lanes (directly or through the `let`s it computes again), or adds up row or
    /// column statistics.
    fn rowwise(&self, level: usize) -> bool {
        let plan = self.plan;
        let roots = self.roots(level, Place::Lanes);
        let lets = self.needed_lets(&roots, Place::Lanes);
        let row_statements = plan
            .stmts
            .iter()
            .any(|s| s.level == level && s.kind == Kind::Row);
        let statistics = plan
            .reductions
            .iter()
            .any(|r| r.level == level && matches!(reduced_kind(r.func), Kind::Row | Kind::Col));
        row_statements
            || statistics
            || roots.into_iter().any(reads_rows_or_cols)
            || lets
                .iter()
                .any(|&i| reads_rows_or_cols(update_value(&plan.stmts[plan.lets[i]].stmt)))
    }

    /// What the code at `place` of pass `level` reads and assigns of `p`, `g` and the slots it
    /// keeps as locals (the element slots in the lanes, the column slots in the column loop).
    fn uses(&self, level: usize, place: Place) -> Uses {
        let plan = self.plan;
        let local = |j: usize| match place {
            Place::Cols => self.slot_kinds[j] == Kind::Col,
            Place::Lanes => self.slot_kinds[j] == Kind::Lane,
            _ => false,
        };
        let mut uses = Uses {
            slots: Vec::new(),
            written: Vec::new(),
            loaded: self.read_first(level, place, &local),
            p: false,
            p_written: false,
            g: false,
        };
        for s in &plan.stmts {
            if s.level == level && runs_at(s.kind, place) {
                match s.stmt {
                    UpdateStmt::SetP(_) => uses.p_written = true,
                    UpdateStmt::SetSlot(j, _) if local(j) => uses.written.push(j),
                    _ => {}
                }
            }
        }
        let roots = self.roots(level, place);
        let lets = self.needed_lets(&roots, place);
        let values = roots.into_iter().chain(
            lets.iter()
                .map(|&i| update_value(&plan.stmts[plan.lets[i]].stmt)),
        );
        for e in values {
            refs(e, &mut |r| match r {
                Ref::P => uses.p = true,
                Ref::G => uses.g = true,
                Ref::Slot(j) if local(j) => uses.slots.push(j),
                _ => {}
            });
        }
        uses.p |= uses.p_written;
        uses.slots.extend(&uses.written);
        uses.slots.sort_unstable();
        uses.slots.dedup();
        uses
    }

    /// One pass: its tensor values, its column loop, its row and lane loop, and what it
    /// finishes (the reductions it added up, the matrix steps it stored).
    fn pass(&self, level: usize) -> TokenStream {
        let plan = self.plan;
        let tensor = self.items(level, Place::Tensor);
        let sums = plan
            .reductions
            .iter()
            .enumerate()
            .filter(|(_, r)| r.level == level)
            .map(|(k, r)| {
                let sum = format_ident!("__sum{}", k);
                let red = format_ident!("__red{}", k);
                match reduced_kind(r.func) {
                    Kind::Col => quote!(#red.fill(0.0);),
                    Kind::Row => quote!(),
                    _ => quote!(let mut #sum = __rt::Sum::<__L>::new();),
                }
            });
        let cols = self.cols_loop(level);
        let main = self.main_loop(level);
        let finish = plan
            .reductions
            .iter()
            .enumerate()
            .filter(|(_, r)| r.level == level)
            .map(|(k, r)| finish_reduction(k, r));
        let steps = plan
            .matrices
            .iter()
            .enumerate()
            .filter(|(_, m)| m.level == level)
            .map(|(m, x)| self.matrix_step(m, x));
        quote! {
            #tensor
            #(#sums)*
            #cols
            #main
            #(#finish)*
            #(#steps)*
        }
    }

    /// The loop over the columns of pass `level`, if it has column statements.
    fn cols_loop(&self, level: usize) -> TokenStream {
        let items = self.items(level, Place::Cols);
        if items.is_empty() {
            return quote!();
        }
        let uses = self.uses(level, Place::Cols);
        let loads = uses.slots.iter().map(|&j| {
            let b = format_ident!("__b{}", j);
            let sv = format_ident!("__sv{}", j);
            if uses.loaded.contains(&j) {
                quote!(let mut #sv: __L = __at.load::<__L>(&*#b);)
            } else {
                quote!(let mut #sv: __L;)
            }
        });
        let stores = uses.written.iter().map(|&j| {
            let b = format_ident!("__b{}", j);
            let sv = format_ident!("__sv{}", j);
            quote!(__at.store(#sv, &mut *#b);)
        });
        quote! {
            for __at in __rt::lanes::<__L>(__cols) {
                #(#loads)*
                #items
                #(#stores)*
            }
        }
    }

    /// The loop over the elements of pass `level`: row by row when it reads or computes row
    /// or column values, else over the whole tensor.
    fn main_loop(&self, level: usize) -> TokenStream {
        let rowwise = self.rowwise(level);
        let place = Place::Lanes;
        let items = self.items(level, place);
        let row_items = if rowwise {
            self.items(level, Place::Row)
        } else {
            quote!()
        };
        if items.is_empty() && row_items.is_empty() {
            return quote!();
        }
        let uses = self.uses(level, place);
        let load_p = uses
            .p
            .then(|| quote!(let mut __pv: __L = __e.load::<__L>(&*__p);));
        let store_p = uses.p_written.then(|| quote!(__e.store(__pv, &mut *__p);));
        let load_g = uses
            .g
            .then(|| quote!(let __gv: __L = __e.load::<__L>(__g);));
        let loads = uses.slots.iter().map(|&j| {
            let b = format_ident!("__b{}", j);
            let sv = format_ident!("__sv{}", j);
            if uses.loaded.contains(&j) {
                quote!(let mut #sv: __L = __e.load::<__L>(&*#b);)
            } else {
                quote!(let mut #sv: __L;)
            }
        });
        let stores = uses.written.iter().map(|&j| {
            let b = format_ident!("__b{}", j);
            let sv = format_ident!("__sv{}", j);
            quote!(__e.store(#sv, &mut *#b);)
        });
        let body = quote! {
            #load_p
            #load_g
            #(#loads)*
            #items
            #(#stores)*
            #store_p
        };
        let (per_row, per_tensor) = self.hoisted_lets();
        let views = |span: TokenStream| self.lane_views(level, &uses, span);
        if !rowwise {
            let views = views(quote!(..__numel));
            let lanes = lane_loop(quote!(__numel), &body);
            return quote! {{
                #per_tensor
                #views
                #lanes
            }};
        }
        let row_sums: Vec<(usize, &Reduction)> = self
            .plan
            .reductions
            .iter()
            .enumerate()
            .filter(|(_, r)| r.level == level && reduced_kind(r.func) == Kind::Row)
            .collect();
        let starts = row_sums.iter().map(|(k, _)| {
            let sum = format_ident!("__sum{}", k);
            quote!(let mut #sum = __rt::Sum::<__L>::new();)
        });
        let ends = row_sums.iter().map(|(k, r)| {
            let sum = format_ident!("__sum{}", k);
            let red = format_ident!("__red{}", k);
            match r.func {
                Func::Tensor(TensorStep::RowMean) => quote!(#red[__r] = #sum.total() / __dim_cols;),
                _ => quote!(#red[__r] = #sum.total();),
            }
        });
        let lanes = (!items.is_empty()).then(|| {
            let views = views(quote!(__r * __cols..__r * __cols + __cols));
            let lanes = lane_loop(quote!(__cols), &body);
            quote! {{
                #per_row
                #views
                #lanes
            }}
        });
        quote! {{
            #per_tensor
            for __r in 0..__rows {
                #row_items
                #(#starts)*
                #lanes
                #(#ends)*
            }
        }}
    }

    /// Views of the buffers the lanes of pass `level` walk, over the span they walk (`span` of
    /// each element buffer, the first `__cols` values of each column buffer), shadowing them:
    /// the lane loop's condition then bounds every load and store.
    fn lane_views(&self, level: usize, uses: &Uses, span: TokenStream) -> TokenStream {
        let plan = self.plan;
        let mut element: Vec<proc_macro2::Ident> = Vec::new();
        let mut cols: Vec<proc_macro2::Ident> = Vec::new();
        if uses.p {
            element.push(format_ident!("__p"));
        }
        element.extend(uses.slots.iter().map(|j| format_ident!("__b{}", j)));
        for (m, x) in plan.matrices.iter().enumerate() {
            if x.level == level {
                element.push(format_ident!("__mat{}", m));
            }
        }
        for (k, r) in plan.reductions.iter().enumerate() {
            if r.level == level && reduced_kind(r.func) == Kind::Col && r.arg.kind == Kind::Lane {
                cols.push(format_ident!("__red{}", k));
            }
        }
        let roots = self.roots(level, Place::Lanes);
        let lets = self.needed_lets(&roots, Place::Lanes);
        let values = roots.into_iter().chain(
            lets.iter()
                .map(|&i| update_value(&plan.stmts[plan.lets[i]].stmt)),
        );
        for e in values {
            refs(e, &mut |r| match r {
                Ref::Matrix(m) => element.push(format_ident!("__mat{}", m)),
                Ref::Slot(j) if self.slot_kinds[j] == Kind::Col => {
                    cols.push(format_ident!("__b{}", j))
                }
                Ref::Reduced(k) if reduced_kind(plan.reductions[k].func) == Kind::Col => {
                    cols.push(format_ident!("__red{}", k))
                }
                _ => {}
            });
        }
        for list in [&mut element, &mut cols] {
            list.sort();
            list.dedup();
        }
        let g = uses.g.then(|| quote!(let __g = &__g[#span];));
        quote! {
            #(let #element = &mut #element[#span];)*
            #g
            #(let #cols = &mut #cols[..__cols];)*
        }
    }

    /// Matrix step `m`, run on its stored argument.
    fn matrix_step(&self, m: usize, x: &Matrix) -> TokenStream {
        let mat = format_ident!("__mat{}", m);
        let [steps, a, b, c] = x.scalars.each_ref().map(|s| scalar(s, self.lifted));
        quote! {
            __rt::newton_schulz(
                &mut *#mat,
                __rows,
                __cols,
                (#steps) as u32,
                __rt::Coefficients { a: #a, b: #b, c: #c },
                &mut *__ns,
            );
        }
    }
}

/// Whether `e` computes one value per row or fewer with some arithmetic (a comparison, a mask
/// in lanes, is left where it stands), so that lanes would compute it again for each value.
fn hoistable(e: &TExpr) -> bool {
    matches!(e.kind, Kind::Scalar | Kind::Tensor | Kind::Row)
        && matches!(
            e.node,
            Node::Neg(_) | Node::Bin(..) | Node::Call(..) | Node::PowiLit(..) | Node::If(..)
        )
}

/// A loop of `body` over the lanes of `0..n`: whole lanes while they fit, then the partial
/// one, each as `__e` (and `__at`, the name column values are read at).
fn lane_loop(n: TokenStream, body: &TokenStream) -> TokenStream {
    quote! {
        let mut __i = 0;
        while __i + __L::LANES <= #n {
            let __e = __rt::At { at: __i, valid: __L::LANES };
            let __at = __e;
            #body
            __i += __L::LANES;
        }
        if __i < #n {
            let __e = __rt::At { at: __i, valid: #n - __i };
            let __at = __e;
            #body
        }
    }
}

/// A per-step scalar (a literal or a lifted value) as `f32` code.
fn scalar(e: &TExpr, lifted: &[TExpr]) -> TokenStream {
    match e.node {
        Node::Num(v) => {
            let l = Literal::f32_suffixed(v as f32);
            quote!(#l)
        }
        Node::Lifted(i) if !matches!(lifted[i].node, Node::Cmp(..)) => {
            let field = emit::lifted_field(i);
            quote!(__s.#field)
        }
        _ => unreachable!("the check keeps per-step scalars here"),
    }
}

/// What a reduction gives: one value per tensor, row or column.
fn reduced_kind(f: Func) -> Kind {
    match f {
        Func::Tensor(TensorStep::RowMean) | Func::Tensor(TensorStep::RowSum) => Kind::Row,
        Func::Tensor(TensorStep::ColMean) | Func::Tensor(TensorStep::ColSum) => Kind::Col,
        _ => Kind::Tensor,
    }
}

/// The value of reduction `k` once its pass has added everything up.
fn finish_reduction(k: usize, r: &Reduction) -> TokenStream {
    let sum = format_ident!("__sum{}", k);
    let red = format_ident!("__red{}", k);
    let m = paths::math();
    let count = match r.arg.kind {
        Kind::Row => quote!(__dim_rows),
        Kind::Col => quote!(__dim_cols),
        _ => quote!(__dim_numel),
    };
    match r.func {
        Func::Tensor(TensorStep::Sum) => quote!(let #red: f32 = #sum.total();),
        Func::Tensor(TensorStep::Mean) => quote!(let #red: f32 = #sum.total() / #count;),
        Func::Tensor(TensorStep::Norm) => quote!(let #red: f32 = #m::sqrt(#sum.total());),
        Func::Tensor(TensorStep::Rms) => quote!(let #red: f32 = #m::sqrt(#sum.total() / #count);),
        Func::Tensor(TensorStep::ColMean) => quote! {
            for __v in #red.iter_mut() {
                *__v /= __dim_rows;
            }
        },
        _ => quote!(),
    }
}

/// The local of a dimension, as an `f32`.
fn dim_ident(d: Dim) -> proc_macro2::Ident {
    match d {
        Dim::Rows => format_ident!("__dim_rows"),
        Dim::Cols => format_ident!("__dim_cols"),
        Dim::Numel => format_ident!("__dim_numel"),
        Dim::Rank => format_ident!("__dim_rank"),
    }
}

/// The scratch of a branch's plan, as code over `__rows` and `__cols`: a tensor for each
/// matrix step, a row for each row statistic, a column for each column statistic, and the
/// matrix steps' own.
fn work_regions(plan: &Plan) -> (Vec<(proc_macro2::Ident, TokenStream)>, bool) {
    let mut regions = Vec::new();
    for m in 0..plan.matrices.len() {
        regions.push((format_ident!("__mat{}", m), quote!(__rows * __cols)));
    }
    for (k, r) in plan.reductions.iter().enumerate() {
        match reduced_kind(r.func) {
            Kind::Row => regions.push((format_ident!("__red{}", k), quote!(__rows))),
            Kind::Col => regions.push((format_ident!("__red{}", k), quote!(__cols))),
            _ => {}
        }
    }
    (regions, !plan.matrices.is_empty())
}

/// Whether branch `b` reads or assigns slot `j`.
fn uses_slot(b: &CheckedBranch, j: usize) -> bool {
    b.stmts.iter().any(|s| {
        let mut used = matches!(s, UpdateStmt::SetSlot(k, _) if *k == j);
        refs(update_value(s), &mut |r| used |= r == Ref::Slot(j));
        used
    })
}

/// The items of `Rule` a tensor-wise rule implements: `TENSOR_WISE`, `BRANCHES`, `branch`,
/// `slot_len`, `work_len` and `update_tensor`; or errors for what its plan cannot run.
pub fn items(r: &Rule, slot_names: &[String]) -> Result<TokenStream, syn::Error> {
    let p = paths::private();
    let mut errs = Errors::default();
    let plans: Vec<Plan> = r
        .branches
        .iter()
        .map(|b| Plan::new(b, r.slot_kinds.len()))
        .collect();
    plans
        .iter()
        .for_each(|plan| hazards(plan, slot_names, &mut errs));
    errs.finish()?;
    let names: Vec<String> = r
        .branches
        .iter()
        .map(|b| b.name.clone().unwrap_or_default())
        .collect();
    let branch_names = if r.branches.len() > 1 {
        quote!(&[#(#names),*])
    } else {
        quote!(&[])
    };
    let conditions = r.branches.iter().enumerate().filter_map(|(i, b)| {
        let c = b.when.as_ref()?;
        let dim = match c.dim {
            Dim::Rows => quote!(shape.rows as f64),
            Dim::Cols => quote!(shape.cols as f64),
            Dim::Numel => quote!(shape.numel() as f64),
            Dim::Rank => quote!(shape.rank as f64),
        };
        let v = Literal::f64_suffixed(c.value);
        let op = match c.op {
            CmpOp::Eq => quote!(==),
            CmpOp::Ne => quote!(!=),
            CmpOp::Lt => quote!(<),
            CmpOp::Le => quote!(<=),
            CmpOp::Gt => quote!(>),
            CmpOp::Ge => quote!(>=),
        };
        Some(quote!(if #dim #op #v { return #i; }))
    });
    let last = r.branches.len() - 1;
    let slot_arms = (0..r.slot_kinds.len()).map(|j| {
        let len = match r.slot_kinds[j] {
            Kind::Row => quote!(shape.rows),
            Kind::Col => quote!(shape.cols),
            _ => quote!(shape.numel()),
        };
        let used: Vec<usize> = (0..r.branches.len())
            .filter(|&b| uses_slot(&r.branches[b], j))
            .collect();
        quote!(#j if [#(#used),*].contains(&branch) => #len,)
    });
    let work_arms = plans.iter().enumerate().map(|(b, plan)| {
        let (regions, ns) = work_regions(plan);
        let lens = regions.iter().map(|(_, len)| len);
        let ns = ns.then(|| quote!(+ #p::tensorwise::newton_schulz_serial_work(__rows, __cols)));
        quote!(#b => 0 #(+ #lens)* #ns,)
    });
    let bodies = plans.iter().enumerate().map(|(b, plan)| {
        let emitter = Emitter {
            plan,
            lifted: &r.lifted,
            slot_kinds: &r.slot_kinds,
            hoisted: RefCell::default(),
        };
        let (regions, ns) = work_regions(plan);
        let carve = regions.iter().map(|(id, len)| {
            quote! {
                let (#id, __rest) = ::core::mem::take(&mut __work).split_at_mut(#len);
                __work = __rest;
            }
        });
        let ns = ns.then(|| quote!(let __ns = __work;));
        let passes = (0..plan.passes).map(|k| emitter.pass(k));
        quote! {
            #b => {
                let mut __work = __work;
                #(#carve)*
                #ns
                #(#passes)*
            }
        }
    });
    let slot_shapes = r.slot_shapes.iter().map(|s| format_ident!("{}", s));
    // Every region holds at most one value per value of the tensor: a matrix, a row's or a
    // column's.
    let work_per_value = plans
        .iter()
        .map(|plan| work_regions(plan).0.len())
        .max()
        .unwrap_or(0);
    let matrix_step = plans.iter().any(|plan| !plan.matrices.is_empty());
    Ok(quote! {
        const TENSOR_WISE: bool = true;
        const WORK_PER_VALUE: usize = #work_per_value;
        const MATRIX_STEP: bool = #matrix_step;
        const BRANCHES: &'static [&'static str] = #branch_names;
        const SLOT_SHAPES: &'static [#p::SlotShape] = &[#(#p::SlotShape::#slot_shapes),*];

        fn branch(shape: #p::Shape) -> usize {
            #(#conditions)*
            #last
        }

        fn slot_len(slot: usize, shape: #p::Shape, branch: usize) -> usize {
            match slot {
                #(#slot_arms)*
                _ => 0,
            }
        }

        fn work_len(shape: #p::Shape, branch: usize) -> usize {
            let __rows = shape.rows;
            let __cols = shape.cols;
            match branch {
                #(#work_arms)*
                _ => 0,
            }
        }

        #[inline(always)]
        fn update_tensor<__L: #p::Lane>(__s: &__Step, __t: #p::TensorUpdate<'_>) {
            use #p::tensorwise as __rt;
            let #p::TensorUpdate {
                shape: __shape,
                branch: __branch,
                p: __p,
                g: __g,
                slots: __slots,
                work: __work,
            } = __t;
            let [__b0, __b1, __b2, __b3, __b4, __b5, __b6, __b7] = __slots;
            let __rows = __shape.rows;
            let __cols = __shape.cols;
            let __numel = __rows * __cols;
            let __dim_rows = __rows as f32;
            let __dim_cols = __cols as f32;
            let __dim_numel = __numel as f32;
            let __dim_rank = __shape.rank as f32;
            match __branch {
                #(#bodies)*
                _ => {}
            }
        }
    })
}
