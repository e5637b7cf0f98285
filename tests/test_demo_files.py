"Issue 42 item 4: the demo's own files (table.md, table.csv, paired.csv, the figure, summary.json) never follow a link."
import pytest
from cove.demo import _write_table, demo_config

FAKE = {'cove': dict(overall=dict(success_rate=0.5, n=2, prompt_tokens=10), per_family={})}

@pytest.mark.parametrize('name', ['table.md', 'table.csv'])
def test_table_links_are_not_followed(tmp_path, name):
    target = tmp_path/'someone-elses.txt'
    target.write_text('keep me')
    out = tmp_path/'demo'
    out.mkdir()
    (out/name).symlink_to(target)
    with pytest.raises(ValueError, match='link'): _write_table(demo_config(env={}), out, FAKE, ['cove'], ['math'], 2)
    assert target.read_text() == 'keep me'
