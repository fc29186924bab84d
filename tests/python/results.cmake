# Issue 64: results as pandas DataFrames (python/htm_results, docs/results.md "From Python").
# python.results_study trains a ten-run study (under 10 s on 2 cores) while htm_results reads it;
# python.results checks the package against `htm compare --format csv` and `htm export`;
# python.notebook executes docs/examples/results.ipynb on it. The last two exit 77 (skipped, the
# reason printed) where python3 lacks pandas, or nbclient and matplotlib (HTM_PYTHON names another
# interpreter to try first).
set(HTM_RESULTS_STUDY ${CMAKE_BINARY_DIR}/python-results)
add_test(NAME python.results_study COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/results_study.sh
  $<TARGET_FILE:htm> ${PROJECT_SOURCE_DIR} ${HTM_RESULTS_STUDY})
set_tests_properties(python.results_study PROPERTIES FIXTURES_SETUP python_results LABELS integration TIMEOUT 180
  ENVIRONMENT "HTM_PLUGIN_PATH=${HTM_TEST_PLUGIN_DIR};HTM_PYTHON=${HTM_PYTHON}" PASS_REGULAR_EXPRESSION "results study ready")
add_test(NAME python.results COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/results_test.sh
  $<TARGET_FILE:htm> ${PROJECT_SOURCE_DIR} ${HTM_RESULTS_STUDY}/htm.sqlite)
add_test(NAME python.notebook COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/results_notebook.sh
  $<TARGET_FILE:htm> ${PROJECT_SOURCE_DIR} ${HTM_RESULTS_STUDY}/htm.sqlite)
set_tests_properties(python.results python.notebook PROPERTIES FIXTURES_REQUIRED python_results LABELS integration
  SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT "HTM_PYTHON=${HTM_PYTHON}")
