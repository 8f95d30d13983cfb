"""``git log`` read into commits: a file whose text holds the record mark stays one commit's
patch (a repository is untrusted input), not a commit of its own or a crash."""

from __future__ import annotations

from repo_fixtures import git, make_repo

from llmc.gitlog import read_commits


def test_a_file_holding_the_record_mark_is_part_of_its_commit(tmp_path):
    root = make_repo(tmp_path / "r", {"a.txt": "start\n"})
    fake = "\x1e ab12\x1fp\x1fnot-a-time\x1fsubject\x1fbody\x1f rest"  # a whole "record"
    (root / "a.txt").write_text(f"start\nline {fake}\nlast\n")
    git(root, "commit", "-qam", "Add a line holding the record marks")
    (root / "b.txt").write_text("plain\n")
    git(root, "add", "b.txt")
    git(root, "commit", "-qm", "Add a plain file")
    commits = read_commits(root, None)
    assert [c.subject for c in commits] == [
        "Add a plain file", "Add a line holding the record marks", "fixture",
    ]  # fmt: skip
    marked = commits[1]
    assert [f.path for f in marked.files] == ["a.txt"] and marked.time > 0
    assert any("last" in line for line in marked.files[0].added), "the patch stays whole"
