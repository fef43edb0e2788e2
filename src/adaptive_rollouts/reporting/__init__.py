"""Result files and the rendering of the docs from them (`python -m adaptive_rollouts.reporting.render_docs`)."""
