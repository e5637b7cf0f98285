# cove's JupyterLab, read by `make lab` (which puts this folder on JUPYTER_CONFIG_PATH; your own ~/.jupyter still applies).
# Opening and saving a notebook leaves git clean: the save hook cleans each notebook as `nbdev-clean` does (nbdev's own
# Jupyter hook: it acts because pyproject.toml sets `jupyter_hooks = true`). It drops execution counts, the lab's
# `language_info` and the other metadata nbdev-clean drops, and writes `kernelspec.display_name` as its name.
# The lab fetches nothing: no news feed, no update check, no PyPI extension manager (the pop-up that asks about
# news is switched off in labconfig/default_setting_overrides.json).

def nbdev_clean_jupyter(**kwargs):
    from nbdev.clean import clean_jupyter
    clean_jupyter(**kwargs)

c.ContentsManager.pre_save_hook = nbdev_clean_jupyter
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = 'jupyterlab.NeverCheckForUpdate'
c.LabApp.extension_manager = 'readonly'
