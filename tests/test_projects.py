"""One name per project (lexmem.projects): what people see and what their typing means."""

from __future__ import annotations

from pathlib import Path

from lexmem.api import Lexmem
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


def test_a_name_typed_anywhere_files_the_memory_under_its_project(lm: Lexmem) -> None:
    """`lexmem remember --project shop`, MCP and Quick remember go through the inbox; the
    core's own remember directly. Both file "shop" under the known repository ~/work/shop,
    but never into an opted-out repository: there the name stays a name."""
    from lexmem.service.client import remember_through_inbox

    repo = str(Path.home() / "work" / "shop")
    lm.remember("The shop deploys on Tuesdays", project=repo)
    through_inbox = remember_through_inbox(lm, "The shop's invoices are numbered per year",
                                           project="shop").memories[0]  # fmt: skip
    assert through_inbox.project == repo
    direct = lm.remember("The shop's VAT number is on every invoice", project="shop")
    assert direct.memories[0].project == repo
    assert lm.projects() == [repo]

    other = str(Path.home() / "clients" / "garden")
    lm.remember("The garden site uses Hugo", project=other)
    lm.settings.capture.optout.append(other)  # opted out after (its purge is not the point)
    kept = lm.remember("Buy seeds for the garden in March", project="garden").memories[0]
    assert kept.project == "garden"
