//! PNG files of the figures, rendered from their SVG with resvg (pure Rust).
//!
//! Labels need a font: the system's fonts are loaded once (fontdb scans
//! `/usr/share/fonts` and the like); DejaVu Sans is preferred when present,
//! so the PNG looks like the SVG in a browser. Without any font the PNG
//! would have no labels, so rendering is refused with a sentence instead.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use resvg::usvg::{self, fontdb};

/// Pixels per SVG unit: 2 gives 1720 px wide figures, sharp in print and on
/// high-density screens.
const SCALE: f32 = 2.0;

fn fonts() -> Arc<fontdb::Database> {
    static DB: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut scan = fontdb::Database::new();
        scan.load_system_fonts();
        let family = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"]
            .into_iter()
            .find(|family| scan.faces().any(|f| of_family(f, family)));
        let mut db = in_memory(&scan, family);
        if let Some(family) = family {
            db.set_sans_serif_family(family);
        }
        Arc::new(db)
    })
    .clone()
}

/// `scan` with the files of `family`'s faces read into memory once. A face
/// left on disk is opened and mapped again for every glyph laid out (fontdb's
/// `Source::File`): 11 000 `openat`/`mmap`/`munmap` and half of a report's time
/// (`strace -c -f nflab report`). Other families stay on disk, for the odd
/// glyph the labels' own font lacks.
fn in_memory(scan: &fontdb::Database, family: Option<&str>) -> fontdb::Database {
    let mut read: HashMap<PathBuf, fontdb::Source> = HashMap::new();
    let mut db = fontdb::Database::new();
    for face in scan.faces() {
        let mut face = face.clone();
        let ours = family.is_some_and(|fam| of_family(&face, fam));
        if let (true, fontdb::Source::File(path)) = (ours, &face.source) {
            let loaded = read.entry(path.clone()).or_insert_with(|| {
                std::fs::read(path).map_or(face.source.clone(), |bytes| {
                    fontdb::Source::Binary(Arc::new(bytes))
                })
            });
            face.source = loaded.clone();
        }
        db.push_face_info(face);
    }
    db
}

fn of_family(face: &fontdb::FaceInfo, family: &str) -> bool {
    face.families.iter().any(|(n, _)| n == family)
}

/// Render several SVG documents, in order, on every core: each figure is a
/// few hundred ms of rasterising and compressing, and a report has a dozen.
pub fn render_all(svgs: &[&str]) -> Vec<Result<Vec<u8>, String>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = svgs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = svgs
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(|svg| render(svg)).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().expect("PNG rendering panicked"))
            .collect()
    })
}

/// Render one SVG document to PNG bytes.
pub fn render(svg: &str) -> Result<Vec<u8>, String> {
    let db = fonts();
    if db.is_empty() {
        return Err("no system font found for the labels: install one, e.g. `apt-get install fonts-dejavu-core`".into());
    }
    let opt = usvg::Options {
        fontdb: db,
        font_family: "sans-serif".into(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("SVG not understood: {e}"))?;
    let size = tree.size().to_int_size();
    let (w, h) = (
        (size.width() as f32 * SCALE).ceil() as u32,
        (size.height() as f32 * SCALE).ceil() as u32,
    );
    let mut pixmap = resvg::tiny_skia::Pixmap::new(w, h).ok_or("the figure has no area")?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| format!("PNG encoding failed: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_a_png() {
        let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect x="0" y="0" width="40" height="20" fill="#0072B2"/></svg>"##;
        let png = super::render(svg).unwrap_or_else(|e| {
            // Only a missing font may stop it, and that says so.
            assert!(e.contains("font"), "{e}");
            Vec::from(&b"\x89PNG"[..])
        });
        assert!(png.starts_with(b"\x89PNG"));
    }
}
