//! `disable_symlinks`: files reached through a symbolic link are refused
//! (403) with `on`, or when the link's owner differs from its target's
//! with `if_not_owner`; `from=` leaves a prefix unchecked. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::os::unix::fs::symlink;

use common::*;

#[test]
fn links_are_refused_where_the_location_says() {
    let b = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                location /on/ { disable_symlinks on; }
                location /from/ { root {prefix}/rootlink; disable_symlinks on from=$document_root; }
                location /strict/ { root {prefix}/rootlink; disable_symlinks on; }
                location /owner/ { disable_symlinks if_not_owner; }
            }"#,
        )
        .file("html/real/file.txt", "real\n")
        .file("html/on/real/file.txt", "real\n")
        .file("html/from/file.txt", "via root link\n")
        .file("html/strict/file.txt", "via root link\n")
        .file("html/owner/mine.txt", "mine\n")
        .file("html/owner/theirs.txt", "theirs\n");
    let s = b.start();
    let p = |r: &str| s.path(r);
    symlink(p("html/real/file.txt"), p("html/link.txt")).unwrap();
    symlink(p("html/real"), p("html/linkdir")).unwrap();
    symlink(p("html/loop"), p("html/loop")).unwrap();
    symlink(p("html/on/real/file.txt"), p("html/on/link.txt")).unwrap();
    symlink(p("html/on/real"), p("html/on/linkdir")).unwrap();
    symlink(p("html"), p("rootlink")).unwrap();
    symlink(p("html/owner/mine.txt"), p("html/owner/mine-link.txt")).unwrap();
    symlink(p("html/owner/theirs.txt"), p("html/owner/theirs-link.txt")).unwrap();
    let root = fpm_root();
    if root {
        // The target belongs to someone else than the link (root).
        std::os::unix::fs::chown(p("html/owner/theirs.txt"), Some(65534), Some(65534)).unwrap();
    }
    let status = |path: &str| s.get(path).status;
    // Off (the default): links are followed; a loop is 403 as in nginx.
    assert_eq!(status("/link.txt"), 200);
    assert_eq!(status("/linkdir/file.txt"), 200);
    assert_eq!(status("/loop"), 403);
    // On: a link anywhere in the path is refused.
    assert_eq!(status("/on/real/file.txt"), 200);
    assert_eq!(status("/on/link.txt"), 403);
    // A link in place of a directory: "not a directory", nginx's 404.
    assert_eq!(status("/on/linkdir/file.txt"), 404);
    // from=$document_root: the root may be a link, what is below not.
    assert_eq!(status("/from/file.txt"), 200);
    assert_eq!(status("/strict/file.txt"), 404);
    // if_not_owner: a link to a file of its own owner is fine.
    assert_eq!(status("/owner/mine-link.txt"), 200);
    if root {
        assert_eq!(status("/owner/theirs-link.txt"), 403);
    }
    assert!(s.error_log().contains("link.txt\" failed"), "{}", s.error_log());
}

fn fpm_root() -> bool {
    common::fpm::running_as_root()
}

#[test]
fn from_needs_a_checking_mode() {
    let t = builder().http("server { listen 127.0.0.1:{port}; disable_symlinks off from=$document_root; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success() && err.contains("\"from=\" cannot be used with \"off\" parameter"), "{err}");
}
