//! Name resolution and kind checking of an optimizer into the typed IR.

use super::parse::{Def, Init};
use crate::errors::{self, Errors};
use crate::expr::ast::{self, BinOp, Stmt};
use crate::expr::emit::Prec;
use crate::expr::ir::{self, Binding, Dim, Kind, Node, Ref, Scope, TExpr, TensorSteps};
use syn::spanned::Spanned;

/// Most slots and carried scalars (the runtime's `MAX_SLOTS`, `MAX_CARRIED`).
const MAX_SLOTS: usize = 8;
const MAX_CARRIED: usize = 4;

/// A `step` statement.
pub enum StepStmt {
    Let(usize, TExpr),
    SetCarried(usize, TExpr),
}

/// An `update` statement (lane code, scalars lifted).
pub enum UpdateStmt {
    Let(usize, TExpr),
    SetP(TExpr),
    SetSlot(usize, TExpr),
}

/// A checked optimizer.
pub struct Rule {
    /// Default of each hyper-parameter, as a value and as the user wrote it.
    pub defaults: Vec<(f64, String)>,
    pub slot_inits: Vec<TExpr>,
    pub carry_inits: Vec<TExpr>,
    /// What each slot keeps: one value per element, row or column.
    pub slot_kinds: Vec<Kind>,
    /// How each slot is shaped: the runtime's `SlotShape` variant.
    pub slot_shapes: Vec<&'static str>,
    pub prec: Prec,
    pub step: Vec<StepStmt>,
    /// Scalars computed at the end of `step` for `update` (every branch).
    pub lifted: Vec<TExpr>,
    /// The `update` sections, in order (one for a rule without branches).
    pub branches: Vec<CheckedBranch>,
    /// Whether the rule runs a tensor at a time: it has branches, reductions, matrix steps,
    /// dimensions, or slots of rows or columns.
    pub tensor_wise: bool,
    /// The slots that start as the parameter (`z = p`).
    pub param_slots: Vec<usize>,
    /// The `views`, in order.
    pub views: Vec<View>,
}

/// A checked view: `name = expr` over `p`, the element slots and the hyper-parameters, its
/// scalar parts lifted into `lifted` (computed from the hyper-parameters when it is taken).
pub struct View {
    pub name: String,
    pub expr: TExpr,
    pub lifted: Vec<TExpr>,
}

/// A branch's condition: `dim op literal`.
pub struct Condition {
    pub dim: Dim,
    pub op: ast::CmpOp,
    pub value: f64,
}

/// One checked `update` section.
pub struct CheckedBranch {
    pub name: Option<String>,
    pub when: Option<Condition>,
    pub stmts: Vec<UpdateStmt>,
    /// The span of each statement's target or `let` name.
    pub spans: Vec<proc_macro2::Span>,
}

/// What `step` can read, or with `lane_names` (the step scalars and the slots) `update`, for
/// the unknown-identifier message.
fn readable(def: &Def, lane_names: Option<(&str, &str)>) -> String {
    let hypers = errors::quoted_list(def.hyper.iter().map(|h| &h.name));
    let carried = errors::quoted_list(def.carry.iter().map(|c| &c.name));
    errors::optimizer_readable(&hypers, &carried, lane_names)
}

/// Each declared name with what it is, for the message of a `let` that reuses it.
type Declared = Vec<(String, &'static str)>;

/// Resolves and kind-checks a definition: declarations, initial values, `step`, `update`.
pub fn check(def: &Def) -> Result<Rule, syn::Error> {
    let mut errs = Errors::default();
    let declared = declarations(def, &mut errs);
    let defaults = hyper_defaults(def, &mut errs);
    let param_slots = param_slots(def, &mut errs);
    let slot_inits = initial_values(def, &def.slots, &param_slots, &mut errs);
    let carry_inits = initial_values(def, &def.carry, &[], &mut errs);
    let step_ast = ast::parse_stmts(&def.step, &mut errs);
    let step = check_step(def, &declared, &step_ast, &mut errs);
    if def.update.is_empty() {
        errs.at(def.name.span(), errors::missing_update());
        return errs.finish().and(Err(syn::Error::new(
            def.name.span(),
            errors::missing_update(),
        )));
    }
    let (slot_kinds, slot_shapes) = slot_kinds(def, &mut errs);
    let views = check_views(def, &slot_kinds, &step_ast, &mut errs);
    let mut lifted = Vec::new();
    let mut branches = Vec::new();
    let several = def.update.len() > 1;
    for (i, b) in def.update.iter().enumerate() {
        let last = i + 1 == def.update.len();
        let when = branch_condition(b, several, last, &mut errs);
        let matrices = when
            .as_ref()
            .is_some_and(|c| c.dim == Dim::Rank && c.op == ast::CmpOp::Eq && c.value == 2.0);
        let update_ast = ast::parse_stmts(&b.stmts, &mut errs);
        let mut update = Update {
            lifted: core::mem::take(&mut lifted),
            ..Update::default()
        };
        let mut scope = update_scope(def, &slot_kinds, &step_ast, &update_ast);
        scope.tensor_steps = if matrices {
            TensorSteps::All
        } else {
            TensorSteps::Reductions
        };
        for s in &update_ast {
            update.statement(s, &declared, &mut scope, &mut errs);
        }
        if !update.p_set && !b.stmts.iter().any(assigns_p) {
            errs.at(b.keyword.span(), errors::p_not_updated());
        }
        lifted = update.lifted;
        branches.push(CheckedBranch {
            name: b.name.as_ref().map(|n| n.to_string()),
            when,
            stmts: update.stmts,
            spans: update.spans,
        });
    }
    errs.finish()?;
    let tensor_wise = several
        || slot_kinds.iter().any(|k| *k != Kind::Lane)
        || branches
            .iter()
            .flat_map(|b| &b.stmts)
            .any(|s| reads_tensor_values(update_value(s)));
    Ok(Rule {
        defaults,
        slot_inits,
        carry_inits,
        slot_kinds,
        slot_shapes,
        prec: def.prec,
        step,
        lifted,
        branches,
        tensor_wise,
        param_slots,
        views,
    })
}

/// The value an `update` statement computes.
pub fn update_value(s: &UpdateStmt) -> &TExpr {
    match s {
        UpdateStmt::Let(_, e) | UpdateStmt::SetP(e) | UpdateStmt::SetSlot(_, e) => e,
    }
}

/// Whether `e` reads anything a tensor at a time: a reduction, a matrix step, a dimension, or
/// a value with one per row or column.
fn reads_tensor_values(e: &TExpr) -> bool {
    if matches!(e.kind, Kind::Tensor | Kind::Row | Kind::Col) {
        return true;
    }
    match &e.node {
        Node::Call(f, _) if f.is_tensor_step() => true,
        Node::Ref(Ref::Dim(_)) => true,
        _ => e.children().into_iter().any(reads_tensor_values),
    }
}

/// What each slot keeps, from its dimensions: `[rows]` or `[rows, 1]` a row statistic,
/// `[cols]` or `[1, cols]` a column statistic, none (or a slot that starts as the parameter)
/// one value per element.
fn slot_kinds(def: &Def, errs: &mut Errors) -> (Vec<Kind>, Vec<&'static str>) {
    def.slots
        .iter()
        .map(|s| {
            let Some((span, dims)) = s.dims.as_ref().filter(|_| !is_param(&s.init)) else {
                return (Kind::Lane, "Element");
            };
            let names: Vec<String> = dims
                .iter()
                .map(|d| quote::ToTokens::to_token_stream(d).to_string())
                .collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            match names.as_slice() {
                ["rows"] => (Kind::Row, "Rows"),
                ["rows", "1"] => (Kind::Row, "RowsByOne"),
                ["cols"] => (Kind::Col, "Cols"),
                ["1", "cols"] => (Kind::Col, "OneByCols"),
                ["rows", "cols"] => (Kind::Lane, "Element"),
                _ => {
                    errs.at(*span, errors::slot_shape());
                    (Kind::Lane, "Element")
                }
            }
        })
        .unzip()
}

/// The condition of branch `b`: a name is needed when there are several, and every branch but
/// the last has a condition.
fn branch_condition(
    b: &super::parse::Branch,
    several: bool,
    last: bool,
    errs: &mut Errors,
) -> Option<Condition> {
    if several && b.name.is_none() {
        errs.at(b.keyword.span(), errors::branch_name());
    }
    let when = b.when.as_ref()?;
    if last {
        errs.at(when.span(), errors::last_branch_condition());
        return None;
    }
    let parsed = condition(when);
    if parsed.is_none() {
        errs.at(when.span(), errors::branch_condition());
    }
    parsed
}

/// `dim op literal`, as written.
fn condition(e: &syn::Expr) -> Option<Condition> {
    let syn::Expr::Binary(b) = e else {
        return None;
    };
    let op = match b.op {
        syn::BinOp::Eq(_) => ast::CmpOp::Eq,
        syn::BinOp::Ne(_) => ast::CmpOp::Ne,
        syn::BinOp::Lt(_) => ast::CmpOp::Lt,
        syn::BinOp::Le(_) => ast::CmpOp::Le,
        syn::BinOp::Gt(_) => ast::CmpOp::Gt,
        syn::BinOp::Ge(_) => ast::CmpOp::Ge,
        _ => return None,
    };
    let syn::Expr::Path(p) = &*b.left else {
        return None;
    };
    let dim = match p.path.get_ident()?.to_string().as_str() {
        "rank" => Dim::Rank,
        "rows" => Dim::Rows,
        "cols" => Dim::Cols,
        "numel" => Dim::Numel,
        _ => return None,
    };
    let value = literal(&b.right)?;
    Some(Condition { dim, op, value })
}

/// The declared names: unique, not reserved, within the runtime's limits.
fn declarations(def: &Def, errs: &mut Errors) -> Declared {
    let mut declared = Declared::new();
    let decls = def
        .hyper
        .iter()
        .map(|h| (&h.name, "a hyper-parameter"))
        .chain(def.slots.iter().map(|s| (&s.name, "a slot")))
        .chain(def.carry.iter().map(|c| (&c.name, "a carried scalar")))
        .chain(def.views.iter().map(|v| (&v.name, "a view")));
    for (ident, what) in decls {
        let name = ident.to_string();
        if matches!(name.as_str(), "p" | "g" | "t") {
            errs.at(ident.span(), errors::reserved(&name));
        } else if let Some((_, first)) = declared.iter().find(|(n, _)| *n == name) {
            errs.at(ident.span(), errors::duplicate(&name, first));
        } else {
            declared.push((name, what));
        }
    }
    if def.slots.len() > MAX_SLOTS {
        errs.at(
            def.slots[MAX_SLOTS].name.span(),
            errors::too_many("slots", MAX_SLOTS),
        );
    }
    if def.carry.len() > MAX_CARRIED {
        errs.at(
            def.carry[MAX_CARRIED].name.span(),
            errors::too_many("carried scalars", MAX_CARRIED),
        );
    }
    declared
}

/// Reports a `let` that reuses a declared name.
fn report_redeclared(declared: &Declared, ident: &syn::Ident, errs: &mut Errors) {
    let name = ident.to_string();
    if let Some((_, what)) = declared.iter().find(|(n, _)| *n == name) {
        errs.at(ident.span(), errors::duplicate(&name, what));
    }
}

/// Each hyper-parameter's default, as a value and as written: `f32` with a literal default.
fn hyper_defaults(def: &Def, errs: &mut Errors) -> Vec<(f64, String)> {
    let mut defaults = Vec::new();
    for h in &def.hyper {
        let is_f32 =
            matches!(&h.ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("f32"));
        if !is_f32 {
            errs.at(h.ty.span(), errors::hyper_type());
        }
        match literal(&h.default) {
            Some(v) => defaults.push((v, quote::ToTokens::to_token_stream(&h.default).to_string())),
            None => {
                errs.at(h.default.span(), errors::default_literal());
                defaults.push((0.0, String::new()));
            }
        }
    }
    defaults
}

fn bind_hypers(def: &Def, scope: &mut Scope) {
    for (i, h) in def.hyper.iter().enumerate() {
        scope.bind(
            h.name.to_string(),
            Binding::Ref(Ref::Hyper(i), Kind::Scalar),
        );
    }
}

/// Binds what both `step` and `update` read as scalars: the hyper-parameters, `t` and the
/// carried scalars.
fn bind_step_inputs(def: &Def, scope: &mut Scope) {
    bind_hypers(def, scope);
    scope.bind("t".into(), Binding::Ref(Ref::T, Kind::Scalar));
    for (i, c) in def.carry.iter().enumerate() {
        scope.bind(
            c.name.to_string(),
            Binding::Ref(Ref::Carried(i), Kind::Scalar),
        );
    }
}

/// Binds each of `names` to the message that reading it in this block gets.
fn forbid(scope: &mut Scope, names: impl Iterator<Item = String>, message: fn(&str) -> String) {
    for name in names {
        let msg = message(&name);
        scope.bind(name, Binding::Forbidden(msg));
    }
}

/// Whether an initial value is the parameter itself: `p`.
fn is_param(e: &syn::Expr) -> bool {
    matches!(e, syn::Expr::Path(p) if p.path.is_ident("p"))
}

/// The slots whose initial value is `p`: they start as the parameter, and are shaped like it
/// (dimensions written for one are an error, and ignored).
fn param_slots(def: &Def, errs: &mut Errors) -> Vec<usize> {
    let mut slots = Vec::new();
    for (j, s) in def.slots.iter().enumerate() {
        if !is_param(&s.init) {
            continue;
        }
        if let Some((span, _)) = &s.dims {
            errs.at(*span, errors::param_slot_shaped(&s.name.to_string()));
        }
        slots.push(j);
    }
    slots
}

/// The initial values of slots or carried scalars: literals and hyper-parameters only, or the
/// parameter itself for the slots of `param_slots` (their value here is 0: the optimizer
/// copies the parameter in).
fn initial_values(
    def: &Def,
    list: &[Init],
    param_slots: &[usize],
    errs: &mut Errors,
) -> Vec<TExpr> {
    let mut scope = Scope::new(errors::optimizer_init_readable().into());
    bind_hypers(def, &mut scope);
    let forbidden = ["p", "g", "t"]
        .into_iter()
        .map(String::from)
        .chain(def.slots.iter().map(|s| s.name.to_string()))
        .chain(def.carry.iter().map(|c| c.name.to_string()));
    forbid(&mut scope, forbidden, errors::slot_init_reads);
    let zero = TExpr {
        node: Node::Num(0.0),
        kind: Kind::Scalar,
    };
    list.iter()
        .enumerate()
        .map(|(j, i)| {
            if param_slots.contains(&j) {
                return zero.clone();
            }
            ast::parse_expr(&i.init, errs)
                .and_then(|e| ir::resolve(&e, &scope, errs))
                .unwrap_or_else(|| zero.clone())
        })
        .collect()
}

/// The `views`: each an element-wise value of `p`, the element slots and the
/// hyper-parameters.
fn check_views(def: &Def, slot_kinds: &[Kind], step_ast: &[Stmt], errs: &mut Errors) -> Vec<View> {
    let element_slots = def
        .slots
        .iter()
        .zip(slot_kinds)
        .filter(|(_, k)| **k == Kind::Lane)
        .map(|(s, _)| &s.name);
    let hypers = errors::quoted_list(def.hyper.iter().map(|h| &h.name));
    let slots = errors::quoted_list(element_slots);
    let mut scope = Scope::new(errors::view_readable(&hypers, &slots));
    bind_hypers(def, &mut scope);
    scope.bind("p".into(), Binding::Ref(Ref::P, Kind::Lane));
    for (j, s) in def.slots.iter().enumerate() {
        let binding = if slot_kinds[j] == Kind::Lane {
            Binding::Ref(Ref::Slot(j), Kind::Lane)
        } else {
            Binding::Forbidden(errors::view_reads(&s.name.to_string()))
        };
        scope.bind(s.name.to_string(), binding);
    }
    let per_step = ["g", "t"]
        .into_iter()
        .map(String::from)
        .chain(def.carry.iter().map(|c| c.name.to_string()))
        .chain(lets(step_ast));
    forbid(&mut scope, per_step, errors::view_reads);
    def.views
        .iter()
        .map(|v| {
            if let Some((span, _)) = &v.dims {
                errs.at(*span, errors::view_shaped());
            }
            let expr = ast::parse_expr(&v.init, errs)
                .and_then(|e| ir::resolve(&e, &scope, errs))
                .unwrap_or(TExpr {
                    node: Node::Ref(Ref::P),
                    kind: Kind::Lane,
                });
            let mut lifted = Vec::new();
            let expr = ir::lift(expr, &mut lifted);
            View {
                name: v.name.to_string(),
                expr,
                lifted,
            }
        })
        .collect()
}

/// `step`: scalars only, assigning only carried scalars.
fn check_step(
    def: &Def,
    declared: &Declared,
    step_ast: &[Stmt],
    errs: &mut Errors,
) -> Vec<StepStmt> {
    let mut scope = Scope::new(readable(def, None));
    bind_step_inputs(def, &mut scope);
    let per_element = ["p", "g"]
        .into_iter()
        .map(String::from)
        .chain(def.slots.iter().map(|s| s.name.to_string()));
    forbid(&mut scope, per_element, errors::element_in_step);
    scope.later = lets(step_ast);
    let mut step = Vec::new();
    let mut step_lets = 0;
    for s in step_ast {
        match s {
            Stmt::Let(ident, e) => {
                report_redeclared(declared, ident, errs);
                let binding = match e.as_ref().and_then(|e| ir::resolve(e, &scope, errs)) {
                    Some(te) => {
                        step.push(StepStmt::Let(step_lets, te));
                        Binding::Ref(Ref::StepLet(step_lets), Kind::Scalar)
                    }
                    None => Binding::Reported,
                };
                scope.bind(ident.to_string(), binding);
                step_lets += 1;
            }
            Stmt::Assign { target, op, value } => {
                let Some(idx) = def.carry.iter().position(|c| c.name == *target) else {
                    errs.at(target.span(), step_assignment_error(&scope, target));
                    continue;
                };
                let carried = Ref::Carried(idx);
                if let Some(te) = assigned(carried, Kind::Scalar, *op, value, &scope, errs) {
                    step.push(StepStmt::SetCarried(idx, te));
                }
            }
        }
    }
    step
}

/// Why `step` cannot assign `target`, which is not a carried scalar.
fn step_assignment_error(scope: &Scope, target: &syn::Ident) -> String {
    let name = target.to_string();
    match scope.lookup(&name) {
        Some(Binding::Ref(Ref::Hyper(_), _)) => errors::assign_readonly(&name, "hyper-parameter"),
        Some(Binding::Ref(Ref::T, _)) => errors::assign_readonly(&name, "step number"),
        Some(Binding::Forbidden(_)) if name == "g" => errors::assign_readonly(&name, "gradient"),
        Some(Binding::Forbidden(_)) if name == "p" => errors::assign_readonly(&name, "parameter"),
        Some(Binding::Forbidden(_)) => errors::assign_readonly(&name, "slot"),
        Some(_) => errors::assign_in_step_target(&name),
        None => errors::unknown_ident(&name, &scope.known),
    }
}

/// What `update` reads: the tensor's dimensions, the step's scalars, and as lanes `p`, `g` and
/// the slots (each of its kind).
fn update_scope(def: &Def, slot_kinds: &[Kind], step_ast: &[Stmt], update_ast: &[Stmt]) -> Scope {
    let step_scalars = errors::quoted_list(lets(step_ast));
    let slots = errors::quoted_list(def.slots.iter().map(|s| &s.name));
    let mut scope = Scope::new(readable(def, Some((&step_scalars, &slots))));
    for (name, dim) in [
        ("rows", Dim::Rows),
        ("cols", Dim::Cols),
        ("numel", Dim::Numel),
        ("rank", Dim::Rank),
    ] {
        scope.bind(name.into(), Binding::Ref(Ref::Dim(dim), Kind::Tensor));
    }
    bind_step_inputs(def, &mut scope);
    for s in step_ast {
        if let Stmt::Let(ident, _) = s {
            let k = step_let_index(step_ast, ident);
            scope.bind(
                ident.to_string(),
                Binding::Ref(Ref::StepLet(k), Kind::Scalar),
            );
        }
    }
    scope.bind("p".into(), Binding::Ref(Ref::P, Kind::Lane));
    scope.bind("g".into(), Binding::Ref(Ref::G, Kind::Lane));
    for (j, s) in def.slots.iter().enumerate() {
        scope.bind(
            s.name.to_string(),
            Binding::Ref(Ref::Slot(j), slot_kinds[j]),
        );
    }
    scope.later = lets(update_ast);
    scope
}

/// The `update` statements checked so far: lane code, its scalars lifted into `step`.
#[derive(Default)]
struct Update {
    stmts: Vec<UpdateStmt>,
    lifted: Vec<TExpr>,
    /// The span of each statement's target or `let` name.
    spans: Vec<proc_macro2::Span>,
    /// How many lane `let`s there are.
    lets: usize,
    /// Whether a statement assigns `p` (even one with a mistake in its value).
    p_set: bool,
}

impl Update {
    fn statement(&mut self, s: &Stmt, declared: &Declared, scope: &mut Scope, errs: &mut Errors) {
        match s {
            Stmt::Let(ident, e) => {
                report_redeclared(declared, ident, errs);
                self.bind_let(ident, e.as_ref(), scope, errs);
            }
            Stmt::Assign { target, op, value } => self.assign(target, *op, value, scope, errs),
        }
    }

    /// `let ident = e;`: a scalar is inlined where it is read, a lane value is a local.
    fn bind_let(
        &mut self,
        ident: &syn::Ident,
        e: Option<&ast::Expr>,
        scope: &mut Scope,
        errs: &mut Errors,
    ) {
        let name = ident.to_string();
        match e.and_then(|e| ir::resolve(e, scope, errs)) {
            None => scope.bind(name, Binding::Reported),
            Some(te) if te.kind == Kind::Scalar => scope.bind(name, Binding::Inline(te)),
            Some(te) => {
                let kind = te.kind;
                let te = ir::lift(te, &mut self.lifted);
                self.stmts.push(UpdateStmt::Let(self.lets, te));
                self.spans.push(ident.span());
                scope.bind(name, Binding::Ref(Ref::Let(self.lets), kind));
                self.lets += 1;
            }
        }
    }

    /// `target op= value`, where `target` is `p` or a slot.
    fn assign(
        &mut self,
        target: &syn::Ident,
        op: Option<BinOp>,
        value: &ast::Expr,
        scope: &Scope,
        errs: &mut Errors,
    ) {
        let (r, target_kind) = match scope.lookup(&target.to_string()) {
            Some(Binding::Ref(r @ (Ref::P | Ref::Slot(_)), k)) => (*r, *k),
            found => {
                errs.at(target.span(), update_assignment_error(scope, target, found));
                return;
            }
        };
        if r == Ref::P {
            self.p_set = true;
        }
        let Some(te) = assigned(r, target_kind, op, value, scope, errs) else {
            return;
        };
        if !te.kind.fits(target_kind) {
            errs.at(
                target.span(),
                errors::assign_kind(
                    &target.to_string(),
                    errors::kind_description(target_kind),
                    errors::kind_description(te.kind),
                ),
            );
            return;
        }
        let te = TExpr {
            kind: target_kind,
            ..te
        };
        let te = ir::lift(te, &mut self.lifted);
        self.spans.push(target.span());
        match r {
            Ref::P => self.stmts.push(UpdateStmt::SetP(te)),
            Ref::Slot(j) => self.stmts.push(UpdateStmt::SetSlot(j, te)),
            _ => {}
        }
    }
}

/// Why `update` cannot assign `target`, `found` in its scope, which is neither `p` nor a slot.
fn update_assignment_error(scope: &Scope, target: &syn::Ident, found: Option<&Binding>) -> String {
    let name = target.to_string();
    match found {
        Some(Binding::Ref(Ref::G, _)) => errors::assign_readonly(&name, "gradient"),
        Some(Binding::Ref(Ref::T, _)) => errors::assign_readonly(&name, "step number"),
        Some(Binding::Ref(Ref::Hyper(_), _)) => errors::assign_readonly(&name, "hyper-parameter"),
        Some(Binding::Ref(Ref::StepLet(_) | Ref::Carried(_), _)) => {
            errors::assign_readonly(&name, "step scalar")
        }
        Some(_) => errors::assign_readonly(&name, "temporary"),
        None if scope.later.contains(&name) => errors::used_before_let(&name),
        None => errors::unknown_ident(&name, &scope.known),
    }
}

/// Whether a statement, even one that failed to parse further, assigns `p`.
fn assigns_p(s: &syn::Stmt) -> bool {
    let left = match s {
        syn::Stmt::Expr(syn::Expr::Assign(a), _) => &*a.left,
        syn::Stmt::Expr(syn::Expr::Binary(b), _) => &*b.left,
        _ => return false,
    };
    matches!(left, syn::Expr::Path(p) if p.path.is_ident("p"))
}

/// The value stored by `target op= value` (or `target = value`).
fn assigned(
    target: Ref,
    kind: Kind,
    op: Option<BinOp>,
    value: &ast::Expr,
    scope: &Scope,
    errs: &mut Errors,
) -> Option<TExpr> {
    let v = ir::resolve(value, scope, errs)?;
    Some(match op {
        None => v,
        Some(op) => TExpr {
            kind: if kind == Kind::Scalar {
                v.kind
            } else {
                kind.join(v.kind)
            },
            node: Node::Bin(
                op,
                Box::new(TExpr {
                    node: Node::Ref(target),
                    kind,
                }),
                Box::new(v),
            ),
        },
    })
}

fn lets(stmts: &[Stmt]) -> Vec<String> {
    stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Let(i, _) => Some(i.to_string()),
            Stmt::Assign { .. } => None,
        })
        .collect()
}

/// Index of the `let` that binds `ident` in `step` (the last one, as later ones shadow).
fn step_let_index(stmts: &[Stmt], ident: &syn::Ident) -> usize {
    let mut k = 0;
    let mut found = 0;
    for s in stmts {
        if let Stmt::Let(i, _) = s {
            if i == ident {
                found = k;
            }
            k += 1;
        }
    }
    found
}

/// A number literal, possibly negated.
fn literal(e: &syn::Expr) -> Option<f64> {
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Float(f) => f.base10_parse().ok(),
            syn::Lit::Int(i) => i.base10_parse::<i64>().ok().map(|v| v as f64),
            _ => None,
        },
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => literal(&u.expr).map(|v| -v),
        syn::Expr::Paren(p) => literal(&p.expr),
        _ => None,
    }
    .filter(|v: &f64| (*v as f32).is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(src: &str) -> Result<Rule, syn::Error> {
        let def: Def = syn::parse_str(src).expect("parses");
        check(&def)
    }

    #[test]
    fn scalar_sub_expressions_are_lifted_once_per_step() {
        let r = rule(
            "struct A {
                hyper { lr: f32 = 0.1, b: f32 = 0.9 }
                slots { m = 0.0 }
                step { let a = lr * 2.0; }
                update { m += (g - m) * (1.0 - b); p -= a * m * (1.0 - b); }
            }",
        )
        .unwrap();
        assert_eq!(r.lifted.len(), 2, "`1 - b` is shared, `a` is the other");
        assert_eq!(r.branches[0].stmts.len(), 2);
    }

    #[test]
    fn scalar_lets_of_update_are_folded_into_step() {
        let r = rule(
            "struct A {
                hyper { lr: f32 = 0.1 }
                update { let c = lr * lr; let d = g * c; p -= d; }
            }",
        )
        .unwrap();
        assert_eq!(r.lifted.len(), 1);
        assert!(
            matches!(r.branches[0].stmts[0], UpdateStmt::Let(0, _)),
            "only the lane `let` stays"
        );
    }

    #[test]
    fn a_scalar_condition_becomes_a_step_flag() {
        let r = rule(
            "struct A {
                hyper { lr: f32 = 0.1 }
                slots { m = 0.0 }
                update { m = if t == 1.0 { g } else { m + g }; p -= lr * m; }
            }",
        )
        .unwrap();
        assert!(r.lifted.iter().any(|e| matches!(e.node, Node::Cmp(..))));
    }

    #[test]
    fn every_mistake_of_a_phase_is_reported_together() {
        let e = rule(
            "struct A {
                hyper { lr: f32 = 0.1, lr: f32 = 0.2 }
                update { p -= x * y; }
            }",
        )
        .err()
        .unwrap();
        assert_eq!(
            e.into_iter().count(),
            3,
            "duplicate `lr`, unknown `x`, unknown `y`"
        );
    }

    /// A `let` with a mistake (in its value, its form or the names it reads) is one error: its
    /// name is still bound, so that its uses raise none.
    #[test]
    fn a_let_with_a_mistake_is_one_error() {
        for (stmts, words) in [
            ("update { let h = if g > 0.0 { g }; p -= lr * h; }", "else"),
            ("update { let h: f64 = g; p -= lr * h; }", "let name"),
            (
                "update { let (h, k) = (g, g); p -= lr * h * k; }",
                "let name",
            ),
            ("update { let h = g * w; p -= lr * h.powi(2) * h; }", "`w`"),
            (
                "step { let s = if t > 1.0 { lr }; } update { p -= s * g; }",
                "else",
            ),
            ("step { let s = lr * w; } update { p -= s * g; }", "`w`"),
        ] {
            let src = format!("struct A {{ hyper {{ lr: f32 = 0.1 }} {stmts} }}");
            let errs: Vec<String> = rule(&src)
                .err()
                .unwrap()
                .into_iter()
                .map(|e| e.to_string())
                .collect();
            assert_eq!(errs.len(), 1, "{stmts}: {errs:?}");
            assert!(errs[0].contains(words), "{stmts}: {errs:?}");
        }
    }
}
