from agent.cgroups.ancestry import nearest_ancestor


def test_own_entry_then_nearest_ancestor():
    index = {"/kubepods/pod1": "pod", "/kubepods/pod1/ctr": "ctr"}
    assert nearest_ancestor(index, "/kubepods/pod1/ctr/") == "ctr"
    assert nearest_ancestor(index, "/kubepods/pod1/ctr/threads/a") == "ctr"
    assert nearest_ancestor(index, "/kubepods/pod1/other") == "pod"
    assert nearest_ancestor(index, "/kubepods/pod2/ctr") is None
    assert nearest_ancestor(index, "/") is None


def test_a_key_that_is_no_path_matches_only_itself():
    index = {"(other)": 1, "": 2}
    assert nearest_ancestor(index, "(other)") == 1
    assert nearest_ancestor(index, "x/(other)") is None
