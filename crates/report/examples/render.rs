//! Rebuild the report of an artifact tree: `cargo run -p nflab-report --example render -- DIR [FIGURE]`.
//! (`nflab report DIR` does the same; this needs only this crate.)
fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: render DIR [FIGURE]");
        std::process::exit(2);
    };
    let opts = nflab_report::Options {
        only_figure: args.next(),
        no_png: false,
        ..Default::default()
    };
    match nflab_report::write_report_with(std::path::Path::new(&dir), &opts) {
        Ok(w) => {
            for p in &w.problems {
                eprintln!("note: {p}");
            }
            match w.report {
                Some(r) => println!("{}", r.display()),
                None => println!(
                    "{}",
                    w.files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
