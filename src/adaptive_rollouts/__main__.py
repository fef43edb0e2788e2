from adaptive_rollouts.cli import main

raise SystemExit(main())
