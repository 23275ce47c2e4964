//! `switchyard records --records DIR ...`: list, show and export what the record store
//! (`DIR/switchyard.sqlite3`) holds. The rendering and export logic lives in the
//! `switchyard-records` crate; this file only parses flags and picks the output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use switchyard_records::export::{SftMode, export_jsonl, export_sft};
use switchyard_records::html::render_html;
use switchyard_records::timeline::{
    RunView, render_exchange, render_exchange_list, render_run_list, render_timeline,
};
use switchyard_records::usage::{
    UsageGrouping, UsageTally, UsageWindow, parse_instant, render_usage,
};
use switchyard_records::{ExchangeFilter, RecordStore, StoreError, StoreSpec};

/// `switchyard records` flags.
#[derive(Debug, clap::Args)]
pub struct RecordsArgs {
    /// Records directory (the store is DIR/switchyard.sqlite3), or a PostgreSQL URL
    /// (`postgres://user@host/db`).
    #[arg(
        long = "records",
        value_name = "DIR|URL",
        env = "SWITCHYARD_RECORDS",
        hide_env_values = true
    )]
    pub records: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub command: RecordsCommand,
}

/// `switchyard records` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RecordsCommand {
    /// List runs: id, agent, model, outcome, turns, tool calls, tokens, duration.
    List,
    /// Show one run as a readable timeline (or write a self-contained HTML page with --html).
    Show {
        /// Run id, or a unique prefix of it.
        run: String,
        /// Write an HTML timeline to FILE instead of printing text.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// List model exchanges: id, receive time, run, API, models, status, latency, tokens, calls.
    /// Exchanges of a standalone `switchyard gateway` belong to no run; `list` does not show them.
    Exchanges {
        /// Only this run's exchanges (run id, or a unique prefix of it).
        #[arg(long, value_name = "RUN", conflicts_with = "unattributed")]
        run: Option<String>,
        /// Only exchanges that belong to no run.
        #[arg(long)]
        unattributed: bool,
        /// Show the newest N (0: all).
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: usize,
    },
    /// Usage totals of model exchanges by upstream model (or requested model, run, day):
    /// exchanges, ok, failed, retries, tokens in/cached/out/reasoning, delivered calls and
    /// latency p50/p95, within an optional time window. Covers exchanges of runs and of a
    /// standalone `switchyard gateway`.
    Usage {
        /// Only this run's exchanges (run id, or a unique prefix of it).
        #[arg(long, value_name = "RUN", conflicts_with = "unattributed")]
        run: Option<String>,
        /// Only exchanges that belong to no run.
        #[arg(long)]
        unattributed: bool,
        /// What to group by.
        #[arg(long, value_enum, default_value_t = UsageBy::UpstreamModel)]
        by: UsageBy,
        /// Only exchanges received at or after this time (YYYY-MM-DD at UTC midnight, or
        /// RFC 3339).
        #[arg(long, value_name = "TIME", value_parser = parse_instant)]
        since: Option<DateTime<Utc>>,
        /// Only exchanges received before this time (same forms as --since).
        #[arg(long, value_name = "TIME", value_parser = parse_instant)]
        until: Option<DateTime<Utc>>,
        /// Print the report as one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one model exchange: summary, delivered calls, notes and the whole stored record.
    Exchange {
        /// Exchange id, or a unique prefix of it.
        id: String,
    },
    /// Replay a recorded run's model requests through a context policy offline and print each
    /// request's tokens before and after: how to choose budgets for a model.
    ReplayContext(super::replay_context::ReplayContextArgs),
    /// Export the store as JSON lines.
    Export {
        /// `jsonl`: every record; `sft`: validated OpenAI chat fine-tuning examples.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// `sft`: one example per exchange, instead of one per conversation (an exchange whose
        /// history a later exchange of its run continues is then exported on its own too).
        #[arg(long)]
        per_exchange: bool,
    },
}

/// Groupings of `records usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UsageBy {
    /// The upstream model each exchange was routed to (what the provider bills).
    UpstreamModel,
    /// The model name the guest asked for.
    RequestedModel,
    /// The run (`-`: exchanges of no run).
    Run,
    /// The UTC day the request was received.
    Day,
}

impl From<UsageBy> for UsageGrouping {
    fn from(by: UsageBy) -> Self {
        match by {
            UsageBy::UpstreamModel => UsageGrouping::UpstreamModel,
            UsageBy::RequestedModel => UsageGrouping::RequestedModel,
            UsageBy::Run => UsageGrouping::Run,
            UsageBy::Day => UsageGrouping::Day,
        }
    }
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Everything, one `{"record": kind, "data": ...}` object per line.
    Jsonl,
    /// OpenAI chat fine-tuning lines from upstream requests and responses.
    Sft,
}

/// Entry point. A reader that goes away early (e.g. `| head`) ends the output quietly: what it
/// read is all it wanted.
pub fn run(args: RecordsArgs) -> Result<()> {
    match run_command(args) {
        Err(error) if reader_went_away(&error) => Ok(()),
        result => result,
    }
}

/// True when `error` comes from writing to a pipe whose reader is gone.
fn reader_went_away(error: &anyhow::Error) -> bool {
    let broken = Some(std::io::ErrorKind::BrokenPipe);
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            == broken
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == broken
    })
}

fn run_command(args: RecordsArgs) -> Result<()> {
    let spec = StoreSpec::from_path(&args.records)?;
    let shown = match &spec {
        StoreSpec::Sqlite(dir) => switchyard_records::store_path(dir).display().to_string(),
        StoreSpec::Postgres(url) => url.to_string(),
    };
    let store = spec
        .open_existing()
        .with_context(|| format!("opening the record store {shown}"))?;
    let store: &dyn RecordStore = &*store;
    match args.command {
        RecordsCommand::List => {
            let runs = store.runs().context("reading runs")?;
            let totals = switchyard_records::timeline::run_token_totals(store)
                .context("summing exchanges")?;
            write_stdout(&render_run_list(&runs, &totals))?;
            let outside = store
                .exchange_count(ExchangeFilter::Unattributed)
                .context("counting exchanges")?;
            if outside > 0 {
                eprintln!(
                    "{outside} model exchanges belong to no run (recorded by `switchyard gateway`): \
                     see `switchyard records exchanges --unattributed`"
                );
            }
        }
        RecordsCommand::Exchanges {
            run,
            unattributed,
            limit,
        } => {
            let filter = exchange_filter(store, run.as_deref(), unattributed)?;
            let limit = (limit > 0).then_some(limit);
            let exchanges = store
                .exchange_summaries(filter, limit)
                .context("reading exchanges")?;
            write_stdout(&render_exchange_list(&exchanges))?;
            // Counted only when the limit was reached: then there may be more.
            if limit == Some(exchanges.len()) {
                let total = store.exchange_count(filter).context("counting exchanges")?;
                if (exchanges.len() as u64) < total {
                    eprintln!(
                        "showing the newest {} of {total} exchanges (--limit 0 shows all)",
                        exchanges.len()
                    );
                }
            }
        }
        RecordsCommand::Usage {
            run,
            unattributed,
            by,
            since,
            until,
            json,
        } => {
            let filter = exchange_filter(store, run.as_deref(), unattributed)?;
            let mut tally = UsageTally::within(by.into(), UsageWindow { since, until });
            store
                .for_each_exchange_summary(filter, &mut |exchange| tally.add(&exchange))
                .context("reading exchanges")?;
            let report = tally.finish();
            if json {
                let mut text =
                    serde_json::to_string(&report).context("writing the usage report")?;
                text.push('\n');
                write_stdout(&text)?;
            } else {
                write_stdout(&render_usage(&report))?;
            }
        }
        RecordsCommand::ReplayContext(args) => {
            write_stdout(&super::replay_context::run(store, &args)?)?;
        }
        RecordsCommand::Exchange { id } => {
            let exchange = store
                .resolve_exchange(&id)
                .with_context(|| format!("finding exchange {id}"))?;
            write_stdout(&render_exchange(&exchange))?;
        }
        RecordsCommand::Show { run, html } => {
            let view = match RunView::load(store, &run) {
                Ok(view) => view,
                // Given an exchange's id: say where it is shown.
                Err(StoreError::RunNotFound(_)) if store.resolve_exchange(&run).is_ok() => {
                    anyhow::bail!(
                        "{run} is a model exchange, not a run: \
                         see `switchyard records exchange {run}`"
                    )
                }
                Err(error) => return Err(error).with_context(|| format!("loading run {run}")),
            };
            match html {
                Some(file) => {
                    std::fs::write(&file, render_html(&view))
                        .with_context(|| format!("writing {}", file.display()))?;
                    eprintln!("wrote {}", file.display());
                }
                None => write_stdout(&render_timeline(&view))?,
            }
        }
        RecordsCommand::Export {
            format,
            out,
            per_exchange,
        } => {
            let mut sink: Box<dyn Write> = match &out {
                Some(file) => Box::new(BufWriter::new(
                    File::create(file).with_context(|| format!("creating {}", file.display()))?,
                )),
                None => Box::new(BufWriter::new(std::io::stdout().lock())),
            };
            match format {
                ExportFormat::Jsonl => {
                    let stats = export_jsonl(store, &mut sink).context("exporting jsonl")?;
                    eprintln!("exported {} records", stats.written);
                }
                ExportFormat::Sft => {
                    let mode = if per_exchange {
                        SftMode::PerExchange
                    } else {
                        SftMode::Conversations
                    };
                    let stats = export_sft(store, &mut sink, mode, &mut |rejection| {
                        eprintln!(
                            "switchyard: sft: exchange {} not exported: {}",
                            rejection.exchange_id, rejection.reason
                        );
                    })
                    .context("exporting sft")?;
                    eprintln!(
                        "exported {} examples, rejected {}, folded into a later turn of their \
                         conversation {}",
                        stats.written, stats.rejected, stats.folded
                    );
                }
            }
            sink.flush().context("flushing the export")?;
        }
    }
    Ok(())
}

/// The exchanges `--run RUN` or `--unattributed` select (all without either).
fn exchange_filter(
    store: &dyn RecordStore,
    run: Option<&str>,
    unattributed: bool,
) -> Result<ExchangeFilter> {
    Ok(match (run, unattributed) {
        (Some(run), _) => ExchangeFilter::Run(
            store
                .resolve_run(run)
                .with_context(|| format!("finding run {run}"))?
                .id,
        ),
        (None, true) => ExchangeFilter::Unattributed,
        (None, false) => ExchangeFilter::All,
    })
}

/// Writes `text` to stdout (unlike `print!`, a closed stdout is an error, not a panic).
fn write_stdout(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
}
