//! `list` and `show` for principals, grants, policies, executions and runs. Each is one engine
//! read as the authenticated caller, printed as a table or, with `--json`, as JSON. With
//! `--server` the same read is the route's; either way the answer is the route's typed form of
//! the engine's view (the local view goes through the same conversion the route makes), so one
//! rendering serves both and prints the same.

use crate::lifecycle_cmd::{Common, Ctx};
use crate::remote::{Client, segment};
use anyhow::{Context as _, Result};
use serde::Serialize;
use std::process::ExitCode;
use verdict_core::contracts::Policy;
use verdict_core::digest::Digest;
use verdict_server::admin::{GatePolicy, GrantOut, PolicyOut, PrincipalDetail, PrincipalOut};
use verdict_server::reads::GateOut;
use verdict_server::work::{ExecutionOut, RunOut};

/// Options of every listing.
#[derive(clap::Args)]
pub struct View {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    common: Common,
}

/// `principal list|show`.
#[derive(clap::Subcommand)]
pub enum PrincipalBrowse {
    /// List principals (an operator sees all, anyone else itself).
    List(View),
    /// Show a principal and its grants (an operator any, anyone else itself).
    Show {
        /// Name.
        name: String,
        #[command(flatten)]
        view: View,
    },
}

/// `grant list|show`.
#[derive(clap::Subcommand)]
pub enum GrantBrowse {
    /// List grants, with whether each is in force now (an operator sees all, anyone else its
    /// own).
    List {
        /// Only this principal's grants.
        #[arg(long)]
        principal: Option<String>,
        #[command(flatten)]
        view: View,
    },
    /// Show one grant.
    Show {
        /// Grant id.
        id: String,
        #[command(flatten)]
        view: View,
    },
}

/// `policy list|show`.
#[derive(clap::Subcommand)]
pub enum PolicyBrowse {
    /// List the gates and their current policies.
    List(View),
    /// Show a policy: the one with this digest, else the current one of --gate.
    Show {
        /// Policy digest.
        digest: Option<String>,
        #[command(flatten)]
        view: View,
    },
}

/// `execution list|show`.
#[derive(clap::Subcommand)]
pub enum ExecutionBrowse {
    /// List the executions the caller may read, with their current subject.
    List(View),
    /// Show an execution and every subject it had.
    Show {
        /// Execution id.
        execution: String,
        #[command(flatten)]
        view: View,
    },
}

/// `run list|show`.
#[derive(clap::Subcommand)]
pub enum RunBrowse {
    /// List the verifier runs of an execution.
    List {
        /// Execution id.
        execution: String,
        #[command(flatten)]
        view: View,
    },
    /// Show a verifier run and its statuses.
    Show {
        /// Run id.
        run: String,
        #[command(flatten)]
        view: View,
    },
}

/// Prints `value` as JSON, or `text` for people.
fn render<T: Serialize>(view: &View, value: &T, text: impl FnOnce() -> String) -> Result<ExitCode> {
    if view.json {
        outln!("{}", serde_json::to_string_pretty(value)?)?;
    } else {
        crate::out::write_all(text().as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn grant_line(g: &GrantOut) -> String {
    let state = match (&g.revoked_at, g.in_force) {
        (Some(at), _) => format!("revoked at {at}"),
        (None, true) => "in force".to_owned(),
        (None, false) => "expired".to_owned(),
    };
    format!(
        "{}  {}  {} {} {}  until {}  {state}\n",
        g.grant_id, g.principal, g.access, g.scope, g.scope_id, g.expires_at
    )
}

fn run_line(r: &RunOut) -> String {
    let last = r.events.last().map_or("admitted", |e| e.status.as_str());
    let reason = r
        .events
        .last()
        .and_then(|e| e.reason.as_deref())
        .unwrap_or("");
    format!(
        "{}  {} ({})  generation {}  {last} {reason}\n",
        r.run_id, r.verifier, r.class, r.generation
    )
}

/// Where a read goes: the server named by `--server`, or the store opened here with the
/// caller authenticated.
enum Source {
    Remote(Client),
    Local(Ctx, verdict_engine::Principal),
}

async fn open(view: &View) -> Result<Source> {
    if let Some(client) = crate::remote::client(&view.common)? {
        return Ok(Source::Remote(client));
    }
    let ctx = Ctx::open(&view.common).await?;
    let caller = ctx.caller().await?;
    Ok(Source::Local(ctx, caller))
}

fn views<A, B: From<A>>(items: Vec<A>) -> Vec<B> {
    items.into_iter().map(Into::into).collect()
}

/// A principal and its grants, as `principal show` prints it.
#[derive(Serialize)]
struct Shown {
    principal: PrincipalOut,
    grants: Vec<GrantOut>,
}

/// Runs `principal list|show`.
pub async fn principal(cmd: PrincipalBrowse) -> Result<ExitCode> {
    match cmd {
        PrincipalBrowse::List(view) => {
            let all: Vec<PrincipalOut> = match open(&view).await? {
                Source::Remote(c) => c.get_all("v1/principals").await?,
                Source::Local(ctx, caller) => views(ctx.engine.list_principals(&caller).await?),
            };
            render(&view, &all, || {
                all.iter()
                    .map(|p| format!("{}  {}\n", p.name, p.role))
                    .collect()
            })
        }
        PrincipalBrowse::Show { name, view } => {
            let shown = match open(&view).await? {
                Source::Remote(c) => {
                    let d: PrincipalDetail =
                        c.get(&format!("v1/principals/{}", segment(&name))).await?;
                    Shown {
                        principal: PrincipalOut {
                            name: d.name,
                            role: d.role,
                        },
                        grants: d.grants,
                    }
                }
                Source::Local(ctx, caller) => {
                    let (p, grants) = ctx.engine.show_principal(&caller, &name).await?;
                    Shown {
                        principal: p.into(),
                        grants: views(grants),
                    }
                }
            };
            render(&view, &shown, || {
                let mut t = format!(
                    "{}  {}\ngrants:\n",
                    shown.principal.name, shown.principal.role
                );
                for g in &shown.grants {
                    t.push_str("  ");
                    t.push_str(&grant_line(g));
                }
                t
            })
        }
    }
}

/// Runs `grant list|show`.
pub async fn grant(cmd: GrantBrowse) -> Result<ExitCode> {
    match cmd {
        GrantBrowse::List { principal, view } => {
            let all: Vec<GrantOut> = match open(&view).await? {
                Source::Remote(c) => {
                    let path = principal.as_deref().map_or_else(
                        || "v1/grants".to_owned(),
                        |p| format!("v1/grants?principal={}", segment(p)),
                    );
                    c.get_all(&path).await?
                }
                Source::Local(ctx, caller) => views(
                    ctx.engine
                        .list_grants(&caller, principal.as_deref())
                        .await?,
                ),
            };
            render(&view, &all, || all.iter().map(grant_line).collect())
        }
        GrantBrowse::Show { id, view } => {
            let g: GrantOut = match open(&view).await? {
                Source::Remote(c) => c.get(&format!("v1/grants/{}", segment(&id))).await?,
                Source::Local(ctx, caller) => ctx.engine.show_grant(&caller, &id).await?.into(),
            };
            render(&view, &g, || grant_line(&g))
        }
    }
}

/// Runs `policy list|show`.
pub async fn policy(cmd: PolicyBrowse) -> Result<ExitCode> {
    match cmd {
        PolicyBrowse::List(view) => {
            let all: Vec<GateOut> = match open(&view).await? {
                Source::Remote(c) => c.get_all("v1/gates").await?,
                Source::Local(ctx, caller) => views(ctx.engine.list_gates(&caller).await?),
            };
            render(&view, &all, || {
                all.iter()
                    .map(|g| format!("{}  {}  revision {}\n", g.gate, g.policy_digest, g.revision))
                    .collect()
            })
        }
        PolicyBrowse::Show { digest, view } => {
            let digest: Option<Digest> = digest
                .map(|d| d.parse().map_err(|e| anyhow::anyhow!("{d:?}: {e}")))
                .transpose()?;
            let (d, policy): (Digest, Policy) = match open(&view).await? {
                // Without a digest, the server's gate's current policy: the server decides
                // with its own gate.
                Source::Remote(c) => {
                    let (d, doc) = match &digest {
                        Some(d) => {
                            let p: PolicyOut = c
                                .get(&format!("v1/policies/{}", segment(d.as_str())))
                                .await?;
                            (p.policy_digest, p.policy)
                        }
                        None => {
                            let g: GatePolicy = c.get("v1/gate/policy").await?;
                            (g.policy_digest, g.policy)
                        }
                    };
                    let policy = serde_json::from_value(doc)
                        .context("the server's policy does not read as a policy")?;
                    (d, policy)
                }
                Source::Local(ctx, caller) => {
                    ctx.engine.show_policy(&caller, digest.as_ref()).await?
                }
            };
            // The policy document is its own best text form.
            let shown = serde_json::to_string_pretty(&policy)?;
            render(&view, &policy, || format!("{d}\n{shown}\n"))
        }
    }
}

/// Runs `execution list|show`.
pub async fn execution(cmd: ExecutionBrowse) -> Result<ExitCode> {
    match cmd {
        ExecutionBrowse::List(view) => {
            let all: Vec<ExecutionOut> = match open(&view).await? {
                Source::Remote(c) => c.get_all("v1/executions").await?,
                Source::Local(ctx, caller) => views(ctx.engine.list_executions(&caller).await?),
            };
            render(&view, &all, || {
                all.iter()
                    .map(|e| {
                        format!(
                            "{}  generation {}  {}\n",
                            e.execution, e.generation, e.subject_digest
                        )
                    })
                    .collect()
            })
        }
        ExecutionBrowse::Show { execution, view } => {
            let e: ExecutionOut = match open(&view).await? {
                Source::Remote(c) => {
                    c.get(&format!("v1/executions/{}", segment(&execution)))
                        .await?
                }
                Source::Local(ctx, caller) => {
                    ctx.engine.show_execution(&caller, &execution).await?.into()
                }
            };
            render(&view, &e, || {
                let mut t = format!(
                    "{}: generation {}, current subject {}\nsubjects:\n",
                    e.execution, e.generation, e.subject_digest
                );
                for s in &e.subjects {
                    t.push_str(&format!(
                        "  {}  generation {}  by {}\n",
                        s.subject_digest, s.generation, s.producer
                    ));
                }
                t
            })
        }
    }
}

/// Runs `run list|show`.
pub async fn run(cmd: RunBrowse) -> Result<ExitCode> {
    match cmd {
        RunBrowse::List { execution, view } => {
            let all: Vec<RunOut> = match open(&view).await? {
                Source::Remote(c) => {
                    c.get_all(&format!("v1/executions/{}/runs", segment(&execution)))
                        .await?
                }
                Source::Local(ctx, caller) => {
                    views(ctx.engine.list_runs(&caller, &execution).await?)
                }
            };
            render(&view, &all, || all.iter().map(run_line).collect())
        }
        RunBrowse::Show { run, view } => {
            let r: RunOut = match open(&view).await? {
                Source::Remote(c) => c.get(&format!("v1/runs/{}", segment(&run))).await?,
                Source::Local(ctx, caller) => ctx.engine.show_run(&caller, &run).await?.into(),
            };
            render(&view, &r, || {
                format!(
                    "{}request {}\nsubject {}\n",
                    run_line(&r),
                    r.request_digest,
                    r.subject_digest
                )
            })
        }
    }
}
