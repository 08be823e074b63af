"""One name per project (lexmem.projects): what people see and what their typing means."""

from __future__ import annotations

from pathlib import Path

from lexmem.projects import project_label, project_labels, project_name, resolve_project


def test_a_repository_goes_by_its_folder_name() -> None:
    assert project_name("/home/ana/work/shop") == "shop"
    assert project_name("/home/ana/work/shop/") == "shop"
    assert project_name("novel") == "novel"
    assert project_name(None) == "" and project_name("") == ""


def test_labels_tell_apart_only_what_would_look_the_same() -> None:
    home = str(Path.home())
    labels = project_labels(
        [f"{home}/work/shop", "shop", "/srv/clients/shop", f"{home}/work/api", "novel", ""]
    )
    assert labels == {
        f"{home}/work/shop": "shop (~/work)",
        "shop": "shop",
        "/srv/clients/shop": "shop (/srv/clients)",
        f"{home}/work/api": "api",
        "novel": "novel",
    }
    assert len(set(labels.values())) == len(labels)  # no two look alike
    assert project_label(f"{home}/work/api", known=labels) == "api"


def test_typing_a_name_means_the_project_that_goes_by_it() -> None:
    home = str(Path.home())
    repo = f"{home}/work/shop"
    known = [repo, "novel"]
    assert resolve_project("shop", known) == repo  # not a second "shop"
    assert resolve_project(" shop ", known) == repo
    assert resolve_project("novel", known) == "novel"
    assert resolve_project("~/work/shop", known) == repo
    assert resolve_project("garden", known) == "garden"  # a new named project
    assert resolve_project("", known) is None and resolve_project(None, known) is None
    # Two repositories called shop: the labels pick one; the bare name stays a name.
    both = [repo, "/srv/clients/shop"]
    assert resolve_project("shop (/srv/clients)", both) == "/srv/clients/shop"
    assert resolve_project("shop", both) == "shop"
    # A named project that already exists keeps its memories together.
    assert resolve_project("shop", [repo, "shop"]) == "shop"


def test_a_list_offers_projects_by_their_names() -> None:
    from lexmem.projects import project_choices

    home = str(Path.home())
    keys = [f"{home}/notes", f"{home}/work/api", "blog", f"{home}/work/shop", "shop"]
    assert [label for _, label in project_choices(keys)] == [
        "api", "blog", "notes", "shop", "shop (~/work)",
    ]  # fmt: skip
