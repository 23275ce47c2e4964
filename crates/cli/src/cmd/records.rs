//! `switchyard records --records DIR ...`: list, show and export what the record store
//! (`DIR/switchyard.sqlite3`) holds. The rendering and export logic lives in the
//! `switchyard-records` crate; this file only parses flags and picks the output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use switchyard_records::export::{export_jsonl, export_sft};
use switchyard_records::html::render_html;
use switchyard_records::timeline::{RunView, render_run_list, render_timeline};
use switchyard_records::{RecordStore, SqliteStore, store_path};

/// `switchyard records` flags.
#[derive(Debug, clap::Args)]
pub struct RecordsArgs {
    /// Records directory (the store is DIR/switchyard.sqlite3).
    #[arg(long = "records", value_name = "DIR", env = "SWITCHYARD_RECORDS")]
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
    /// Export the store as JSON lines.
    Export {
        /// `jsonl`: every record; `sft`: validated OpenAI chat fine-tuning examples.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Everything, one `{"record": kind, "data": ...}` object per line.
    Jsonl,
    /// OpenAI chat fine-tuning lines from upstream requests and responses.
    Sft,
}

/// Entry point.
pub fn run(args: RecordsArgs) -> Result<()> {
    let path = store_path(&args.records);
    let store = SqliteStore::open_existing(&path)
        .with_context(|| format!("opening the record store {}", path.display()))?;
    match args.command {
        RecordsCommand::List => {
            let runs = store.runs().context("reading runs")?;
            print!("{}", render_run_list(&runs));
        }
        RecordsCommand::Show { run, html } => {
            let view = RunView::load(&store, &run).with_context(|| format!("loading run {run}"))?;
            match html {
                Some(file) => {
                    std::fs::write(&file, render_html(&view))
                        .with_context(|| format!("writing {}", file.display()))?;
                    eprintln!("wrote {}", file.display());
                }
                None => print!("{}", render_timeline(&view)),
            }
        }
        RecordsCommand::Export { format, out } => {
            let mut sink: Box<dyn Write> = match &out {
                Some(file) => Box::new(BufWriter::new(
                    File::create(file).with_context(|| format!("creating {}", file.display()))?,
                )),
                None => Box::new(BufWriter::new(std::io::stdout().lock())),
            };
            match format {
                ExportFormat::Jsonl => {
                    let stats = export_jsonl(&store, &mut sink).context("exporting jsonl")?;
                    eprintln!("exported {} records", stats.written);
                }
                ExportFormat::Sft => {
                    let stats = export_sft(&store, &mut sink, &mut |rejection| {
                        eprintln!(
                            "switchyard: sft: exchange {} not exported: {}",
                            rejection.exchange_id, rejection.reason
                        );
                    })
                    .context("exporting sft")?;
                    eprintln!(
                        "exported {} examples, rejected {}",
                        stats.written, stats.rejected
                    );
                }
            }
            sink.flush().context("flushing the export")?;
        }
    }
    Ok(())
}
