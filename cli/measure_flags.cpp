// measure's and calibrate's flags (measure_flags.h).
#include "cli/measure_flags.h"

namespace memplan::cli {

MeasureCommand add_measure_command(CLI::App& root) {
  MeasureCommand m{root.add_subcommand("measure", "run real LibTorch training steps and compare measured peaks with the estimate"),
                   std::make_shared<profiles::SetupInputs>(), std::make_shared<MeasureFlags>(), std::make_shared<OutputFlags>()};
  CLI::App* app = m.app;
  MeasureFlags* f = m.flags.get();
  add_setup_flags(*app, *m.in);
  app->add_option("--steps", f->steps, "training steps (>= 2; step 1 creates the optimizer state)")->type_name("N");
  app->add_option("--threads", f->threads, "CPU threads for LibTorch (default: LibTorch's)")->type_name("N");
  app->add_option("--layers", f->layers, "run at this depth instead of the model's")->type_name("N");
  app->add_flag("--quiet", f->quiet, "no progress lines on stderr (the result, warnings and errors still print)");
  add_output_flags(*app, *m.output);
  return m;
}

MeasureCommand add_calibrate_command(CLI::App& root) {
  MeasureCommand m{root.add_subcommand("calibrate",
                                       "measure a probe series of real steps on a device and fit what the estimate cannot know "
                                       "there (context, workspace, allocator overhead), checked on held-out probes"),
                   std::make_shared<profiles::SetupInputs>(), std::make_shared<MeasureFlags>(), std::make_shared<OutputFlags>()};
  CLI::App* app = m.app;
  MeasureFlags* f = m.flags.get();
  app->add_option("--device", m.in->device, "cpu or cuda:N")->type_name("DEVICE");
  app->add_option("--from", f->from,
                  "re-fit from saved measurements (what calibrate --json printed, maybe on another machine) "
                  "instead of running the probes")
      ->type_name("FILE");
  app->add_option("--out", f->out, "write the calibration profile (YAML) here (default: <cache>/memplan/calibrations/DEVICE-TIME.yaml); "
                                   "nothing is written when the fit is worse than none on held-out probes (exit 1)")->type_name("FILE");
  app->add_flag("--force", f->force, "replace --out if it exists");
  app->add_flag("--quick", f->quick, "fewer probes");
  app->add_option("--threads", f->threads, "CPU threads for LibTorch")->type_name("N");
  app->add_flag("--quiet", f->quiet, "no progress lines on stderr (the fit, warnings and errors still print)");
  add_output_flags(*app, *m.output);
  return m;
}

}  // namespace memplan::cli
